// Package review shows a change to the person who must decide whether to
// land it: the paths a reviewer should look at twice (symlinks, gitlinks,
// executable bits, CI workflows, hooks, package-manager scripts, editor and
// agent settings) and the diff itself, escaped, coloured on a terminal, with
// word-level highlights inside changed lines.
//
// Everything in a change was written by the agent: file names, contents and
// link targets are printed through termsafe.
package review

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// Entry is one changed path of a tree-to-tree diff.
type Entry struct {
	OldMode, NewMode string
	OldID, NewID     string
	Status           byte // A, M, D, T
	Path             string
}

// Changes lists the paths that differ between two trees (or commits),
// limited to paths when any are given (pathspecs, as git takes them). Each
// path is listed on its own (renames are a delete and an add), so every
// path written is checked and flagged.
func Changes(ctx context.Context, g *gitcmd.Runner, from, to string, paths ...string) ([]Entry, error) {
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--raw", "--full-index", from, to, "--"}
	out, err := g.Run(ctx, nil, append(args, paths...)...)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return parseRaw(string(out)), nil
}

// parseRaw parses `diff-tree --raw -z` output: ":old new oid oid S\0path\0".
func parseRaw(out string) []Entry {
	var list []Entry
	fields := strings.Split(out, "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(fields[i], ":"))
		if len(meta) < 5 {
			continue
		}
		list = append(list, Entry{
			OldMode: meta[0], NewMode: meta[1], OldID: meta[2], NewID: meta[3],
			Status: meta[4][0], Path: fields[i+1],
		})
	}
	return list
}

// Flag is a path a reviewer should look at twice, and why.
type Flag struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// FlagsOf returns the review flags of a change, reading symlink targets
// from the repository. Reasons hold agent text: print them escaped.
func FlagsOf(ctx context.Context, g *gitcmd.Runner, entries []Entry) []Flag {
	flags := Flags(entries, func(id string) string {
		out, err := g.Run(ctx, nil, "cat-file", "blob", id)
		if err != nil {
			return ""
		}
		return string(out)
	})
	binary, err := binaryBlobs(ctx, g, binaryCandidates(entries))
	if err != nil {
		// Unreadable content is itself worth a look.
		return append(flags, Flag{Path: "(all files)", Reason: "could not check for binary content: " + err.Error()})
	}
	return append(flags, binaryFlags(entries, binary)...)
}

// Flags returns the review flags of a change. linkTarget reads a symlink's
// target (a blob) for the message; it may be nil.
func Flags(entries []Entry, linkTarget func(id string) string) []Flag {
	var flags []Flag
	add := func(p, why string) { flags = append(flags, Flag{Path: p, Reason: why}) }
	for _, e := range entries {
		if e.Status == 'D' && !sensitivePath(e.Path) {
			continue
		}
		switch {
		case e.NewMode == "120000":
			why := "symlink"
			if linkTarget != nil {
				if t := linkTarget(e.NewID); t != "" {
					why = "symlink to " + t
					if escapes(e.Path, t) {
						why += " (points outside the repository)"
					}
				}
			}
			add(e.Path, why)
		case e.NewMode == "160000" || e.OldMode == "160000":
			add(e.Path, "gitlink (submodule commit)")
		case e.NewMode == "100755" && e.OldMode != "100755":
			add(e.Path, "executable bit set")
		case e.OldMode == "100755" && e.NewMode == "100644":
			add(e.Path, "executable bit removed")
		}
		if why := sensitiveReason(e.Path); why != "" {
			if e.Status == 'D' {
				why += " (deleted)"
			}
			add(e.Path, why)
		}
	}
	return flags
}

func sensitivePath(p string) bool { return sensitiveReason(p) != "" }

// sensitiveReason says why a path deserves a second look, or "".
func sensitiveReason(p string) string {
	lower := strings.ToLower(p)
	base := path.Base(lower)
	parts := strings.Split(lower, "/")
	has := func(dir string) bool {
		for _, part := range parts[:len(parts)-1] {
			if part == dir {
				return true
			}
		}
		return false
	}
	switch {
	case base == ".gitmodules" || strings.HasPrefix(base, ".gitmodules"):
		return ".gitmodules: submodule URLs and paths"
	case base == ".sandbox.toml" || base == "devcontainer.json" || base == ".devcontainer.json":
		return "sandbox settings: choose the image, setup and verify commands of later sandboxes"
	case base == ".gitattributes":
		return ".gitattributes: can name filters and diff drivers"
	case strings.HasPrefix(lower, ".github/workflows/") || base == ".gitlab-ci.yml" || strings.HasPrefix(lower, ".circleci/") || base == "jenkinsfile" || strings.HasPrefix(lower, ".buildkite/"):
		return "CI configuration: runs with your CI's secrets"
	case has("hooks") || has(".husky") || has(".githooks") || base == ".pre-commit-config.yaml" || base == "lefthook.yml" || base == ".lefthook.yml":
		return "hooks: run on developers' machines"
	case base == "package.json" || base == ".npmrc" || base == ".yarnrc" || base == ".yarnrc.yml" || base == "setup.py" || base == "pyproject.toml" || base == "build.rs" || base == "gemfile" || base == "composer.json" || base == "makefile":
		return "package-manager or build script: runs on install or build"
	case has(".vscode") || has(".idea") || has(".devcontainer") || base == ".envrc":
		return "editor settings: can run commands when the project is opened"
	case has(".claude") || base == ".mcp.json" || has(".cursor") || has(".codex") || base == "claude.md" || base == "agents.md":
		return "agent settings: instruct or configure coding agents"
	}
	return ""
}

// escapes reports whether a symlink at p pointing to target leaves the
// repository (absolute, home-relative, or climbing above the top).
func escapes(p, target string) bool {
	if strings.HasPrefix(target, "/") || strings.HasPrefix(target, "~") {
		return true
	}
	joined := path.Join(path.Dir(p), target)
	return joined == ".." || strings.HasPrefix(joined, "../")
}

// Format is how a change is shown.
type Format int

// Formats of Patch.
const (
	FormatPatch Format = iota
	FormatStat
	FormatNameOnly
)

// PatchOptions say how Patch shows a change.
type PatchOptions struct {
	Format Format
	// Paths limits the diff to these pathspecs.
	Paths []string
	// WordDiff shows changed words instead of changed lines: git's plain
	// word diff ([-old-]{+new+}), or with Porcelain its porcelain form
	// for RenderWords to colour.
	WordDiff, Porcelain bool
	// Text shows every file as text, binary content included (escaped
	// when rendered), like git diff --text.
	Text bool
}

// Patch returns git's diff between two trees (or commits) in the format
// asked for, with renames detected as git diff does (diff.renames is
// honoured). External diff drivers and textconv never run.
func Patch(ctx context.Context, g *gitcmd.Runner, from, to string, o PatchOptions) ([]byte, error) {
	args := []string{"diff", "--no-color"}
	switch o.Format {
	case FormatStat:
		args = append(args, "--stat=100", "--summary")
	case FormatNameOnly:
		args = append(args, "--name-only")
	default:
		if o.WordDiff && o.Porcelain {
			args = append(args, "--word-diff=porcelain")
		} else if o.WordDiff {
			args = append(args, "--word-diff=plain")
		}
	}
	if o.Text {
		args = append(args, "--text")
	}
	args = append(args, from, to, "--")
	out, err := g.Run(ctx, nil, append(args, o.Paths...)...)
	if err != nil {
		return nil, fmt.Errorf("diff: %w", err)
	}
	return out, nil
}
