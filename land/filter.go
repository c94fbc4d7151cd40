package land

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// cleanFilters gives the files a land writes what git add would have
// stored: where the base's attributes (the tip's tree, the user's
// info/attributes and core.attributesFile — never the agent's edits)
// route a path to a filter driver (filter=lfs), the blob is run through
// that driver's clean command from the user's configuration, so the
// commit holds, say, an LFS pointer and the object goes to the host's LFS
// store. It returns the tree with those blobs replaced.
func cleanFilters(ctx context.Context, g *gitcmd.Runner, tipTree, tree gitcmd.Hash, workDir string) (gitcmd.Hash, error) {
	changed, err := g.Run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--raw", "--full-index", tipTree.String(), tree.String())
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	type entry struct{ mode, id, path string }
	var files []entry
	var paths bytes.Buffer
	fields := strings.Split(string(changed), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) < 5 || meta[4] == "D" || (meta[1] != "100644" && meta[1] != "100755") {
			continue
		}
		files = append(files, entry{meta[1], meta[3], fields[i+1]})
		paths.WriteString(fields[i+1] + "\x00")
	}
	if len(files) == 0 {
		return tree, nil
	}
	tmp, err := os.MkdirTemp("", "git-sandbox-land-")
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	defer os.RemoveAll(tmp)
	idx := *g
	idx.IndexFile = filepath.Join(tmp, "index")
	// The attributes come from the base's tree, read into an index of
	// its own: check-attr --cached reads .gitattributes from there.
	if err := idx.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: tipTree.String()}); err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	out, err := idx.Run(ctx, &paths, "check-attr", "--cached", "-z", "--stdin", "filter")
	if err != nil {
		return "", fmt.Errorf("land: read attributes: %w", err)
	}
	driver := map[string]string{}
	attrs := strings.Split(string(out), "\x00")
	for i := 0; i+2 < len(attrs); i += 3 {
		if v := attrs[i+2]; v != "unspecified" && v != "unset" && v != "set" && v != "" {
			driver[attrs[i]] = v
		}
	}
	if len(driver) == 0 {
		return tree, nil
	}
	if err := idx.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: tree.String()}); err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	var info bytes.Buffer
	for _, f := range files {
		name, ok := driver[f.path]
		if !ok {
			continue
		}
		clean, _ := g.Output(ctx, "config", "--get", "filter."+name+".clean")
		if clean == "" {
			required, _ := g.Output(ctx, "config", "--type=bool", "--get", "filter."+name+".required")
			if required == "true" {
				return "", usererr.New("%s needs the filter %q, which has no clean command in your configuration", termsafe.String(f.path), termsafe.String(name)).
					Hint("set filter.%s.clean (for Git LFS: install git-lfs, then git lfs install), and land again; nothing was landed", termsafe.String(name)).
					WithCode(usererr.ExitRefused)
			}
			continue
		}
		if name == "lfs" {
			if _, err := proc.LookPath("git-lfs"); err != nil {
				return "", usererr.New("%s is stored with Git LFS here, but git-lfs is not installed", termsafe.String(f.path)).
					Hint("install git-lfs (then git lfs install), and land again; nothing was landed, and no raw file was committed").
					WithCode(usererr.ExitRefused)
			}
		}
		content, err := g.Run(ctx, nil, "cat-file", "blob", f.id)
		if err != nil {
			return "", fmt.Errorf("land: %w", err)
		}
		cmd := strings.ReplaceAll(clean, "%f", shellQuote(f.path))
		cleaned, err := proc.RunFilter(ctx, proc.FilterOptions{
			Command: cmd, Dir: workDir, Stdin: bytes.NewReader(content),
			Env: []string{"GIT_DIR=" + g.GitDir},
		})
		if err != nil {
			return "", usererr.Wrap(err, "the %s filter failed on %s: %v", termsafe.String(name), termsafe.String(f.path), err).
				Hint("nothing was landed; fix the filter (git config filter.%s.clean) and land again", termsafe.String(name)).
				WithCode(usererr.ExitRefused)
		}
		id, err := g.Run(ctx, bytes.NewReader(cleaned), "hash-object", "-w", "--no-filters", "--stdin")
		if err != nil {
			return "", fmt.Errorf("land: %w", err)
		}
		fmt.Fprintf(&info, "%s %s 0\t%s\x00", f.mode, strings.TrimSpace(string(id)), f.path)
	}
	if info.Len() == 0 {
		return tree, nil
	}
	if _, err := idx.Run(ctx, &info, "update-index", "-z", "--index-info"); err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	out2, err := idx.Output(ctx, "write-tree")
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	return gitcmd.ParseHash(out2)
}

// shellQuote quotes s for sh, as git quotes %f.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
