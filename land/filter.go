package land

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// cleanRequest is what cleanFilters works on.
type cleanRequest struct {
	// tipTree is the base's tip's tree: its attributes decide the filters.
	tipTree gitcmd.Hash
	// tree is the tree a land would write.
	tree gitcmd.Hash
	// workDir is where the filter commands run.
	workDir string
}

// cleanFilters gives the files a land writes what git add would have
// stored: where the base's attributes (the tip's tree, the user's
// info/attributes and core.attributesFile — never the agent's edits)
// route a path to a filter driver (filter=lfs), the blob is run through
// that driver's clean command from the user's configuration, so the
// commit holds, say, an LFS pointer and the object goes to the host's LFS
// store. It returns the tree with those blobs replaced.
func cleanFilters(ctx context.Context, g *gitcmd.Runner, req cleanRequest) (gitcmd.Hash, error) {
	files, err := changedBlobs(ctx, g, req.tipTree, req.tree)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return req.tree, nil
	}
	tmp, err := os.MkdirTemp("", "git-sandbox-land-")
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	defer os.RemoveAll(tmp)
	idx := *g
	idx.IndexFile = filepath.Join(tmp, "index")
	files, err = filterDrivers(ctx, &idx, req.tipTree, files)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return req.tree, nil
	}
	if err := idx.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: req.tree.String()}); err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	var info bytes.Buffer
	for _, f := range files {
		id, err := cleanBlob(ctx, g, f, req.workDir)
		if err != nil {
			return "", err
		}
		if id == "" {
			continue
		}
		fmt.Fprintf(&info, "%s %s 0\t%s\x00", f.mode, id, f.path)
	}
	if info.Len() == 0 {
		return req.tree, nil
	}
	return replaceBlobs(ctx, &idx, &info)
}

// blobEntry is a regular file a land writes: its mode, blob id and path,
// and the filter driver its attributes route it to ("" until
// filterDrivers sets it).
type blobEntry struct{ mode, id, path, driver string }

// changedBlobs lists the regular files (not deleted, not links or
// submodules) that differ between tipTree and tree.
func changedBlobs(ctx context.Context, g *gitcmd.Runner, tipTree, tree gitcmd.Hash) ([]blobEntry, error) {
	changed, err := g.Run(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--raw", "--full-index", tipTree.String(), tree.String())
	if err != nil {
		return nil, fmt.Errorf("land: %w", err)
	}
	var files []blobEntry
	fields := strings.Split(string(changed), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) < 5 || meta[4] == "D" || (meta[1] != "100644" && meta[1] != "100755") {
			continue
		}
		files = append(files, blobEntry{mode: meta[1], id: meta[3], path: fields[i+1]})
	}
	return files, nil
}

// filterDrivers returns the files that the base's attributes route to a
// filter driver, in order, each with its driver set. The attributes come
// from tipTree, read into idx (an index of its own): check-attr --cached
// reads .gitattributes from there.
func filterDrivers(ctx context.Context, idx *gitcmd.Runner, tipTree gitcmd.Hash, files []blobEntry) ([]blobEntry, error) {
	if err := attributesIndex(ctx, idx, tipTree, files); err != nil {
		return nil, fmt.Errorf("land: %w", err)
	}
	var paths bytes.Buffer
	for _, f := range files {
		paths.WriteString(f.path + "\x00")
	}
	out, err := idx.Run(ctx, &paths, "check-attr", "--cached", "-z", "--stdin", "filter")
	if err != nil {
		return nil, fmt.Errorf("land: read attributes: %w", err)
	}
	driver := map[string]string{}
	attrs := strings.Split(string(out), "\x00")
	for i := 0; i+2 < len(attrs); i += 3 {
		if v := attrs[i+2]; v != "unspecified" && v != "unset" && v != "set" && v != "" {
			driver[attrs[i]] = v
		}
	}
	var routed []blobEntry
	for _, f := range files {
		if name, ok := driver[f.path]; ok {
			f.driver = name
			routed = append(routed, f)
		}
	}
	return routed, nil
}

// cleanBlob runs f's blob through the clean command of its filter driver,
// in workDir, and writes the result to the object store. It returns
// the new blob's id, or "" when the driver has no clean command and is
// not required (the blob stays as it is). A required driver without a
// clean command, an LFS driver without git-lfs, and a failing command
// refuse the land.
func cleanBlob(ctx context.Context, g *gitcmd.Runner, f blobEntry, workDir string) (string, error) {
	name := f.driver
	clean, err := cleanCommand(ctx, g, f)
	if clean == "" || err != nil {
		return "", err
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
	return strings.TrimSpace(string(id)), nil
}

// cleanCommand is the clean command the user's configuration gives f's
// filter driver, or "" when it has none and is not required. It
// refuses when f cannot be cleaned as the user's git add would: the
// driver is required but has no clean command, or it is LFS and git-lfs
// is not installed.
func cleanCommand(ctx context.Context, g *gitcmd.Runner, f blobEntry) (string, error) {
	name := f.driver
	clean, _ := g.Output(ctx, "config", "--get", "filter."+name+".clean")
	if clean == "" {
		required, _ := g.Output(ctx, "config", "--type=bool", "--get", "filter."+name+".required")
		if required == "true" {
			return "", usererr.New("%s needs the filter %q, which has no clean command in your configuration", termsafe.String(f.path), termsafe.String(name)).
				Hint("set filter.%s.clean (for Git LFS: install git-lfs, then git lfs install), and land again; nothing was landed", termsafe.String(name)).
				WithCode(usererr.ExitRefused)
		}
		return "", nil
	}
	if name == "lfs" {
		if _, err := proc.LookPath("git-lfs"); err != nil {
			return "", usererr.New("%s is stored with Git LFS here, but git-lfs is not installed", termsafe.String(f.path)).
				Hint("install git-lfs (then git lfs install), and land again; nothing was landed, and no raw file was committed").
				WithCode(usererr.ExitRefused)
		}
	}
	return clean, nil
}

// replaceBlobs writes info (update-index --index-info lines) into idx and
// returns the tree it then holds.
func replaceBlobs(ctx context.Context, idx *gitcmd.Runner, info *bytes.Buffer) (gitcmd.Hash, error) {
	if _, err := idx.Run(ctx, info, "update-index", "-z", "--index-info"); err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	out, err := idx.Output(ctx, "write-tree")
	if err != nil {
		return "", fmt.Errorf("land: %w", err)
	}
	return gitcmd.ParseHash(out)
}

// maxNarrow is how many paths a land narrows its look at the base's
// attributes and checkout to; past it, the whole tree and checkout are
// looked at (pathspecs cost per entry of the index, times their number).
const maxNarrow = 500

// attributesIndex fills the index of idx with what check-attr --cached
// needs to judge files in the base's tree: the .gitattributes files of
// their directories and of every directory above. The whole tree is read
// when the files are many.
func attributesIndex(ctx context.Context, idx *gitcmd.Runner, tipTree gitcmd.Hash, files []blobEntry) error {
	if len(files) > maxNarrow {
		return idx.ReadTree(ctx, gitcmd.ReadTreeRequest{Tree: tipTree.String()})
	}
	seen := map[string]bool{}
	args := []string{"ls-tree", "-r", "-z", "--full-tree", tipTree.String(), "--"}
	for _, f := range files {
		dir := f.path
		for {
			i := strings.LastIndex(dir, "/")
			if i < 0 {
				dir = ""
			} else {
				dir = dir[:i]
			}
			a := path.Join(dir, ".gitattributes")
			if !seen[a] {
				seen[a] = true
				args = append(args, a)
			}
			if dir == "" {
				break
			}
		}
	}
	lit := *idx
	lit.Env = append(slices.Clip(idx.Env), "GIT_LITERAL_PATHSPECS=1")
	out, err := lit.Run(ctx, nil, args...)
	if err != nil {
		return err
	}
	var info bytes.Buffer
	for _, rec := range gitcmd.SplitLines(out) {
		meta, p, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[1] == "blob" {
			fmt.Fprintf(&info, "%s %s 0\t%s\x00", f[0], f[2], p)
		}
	}
	if info.Len() == 0 {
		return nil
	}
	_, err = idx.Run(ctx, &info, "update-index", "-z", "--index-info")
	return err
}

// shellQuote quotes s for sh, as git quotes %f.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
