package review

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// binaryPeek is how much of a blob git looks at to call it binary.
const binaryPeek = 8000

// binaryBlobs reports, for each blob id, whether git's diff would show it
// as binary: a NUL byte in its first 8000 bytes. Blobs are streamed through
// one git cat-file; only their first bytes are kept.
func binaryBlobs(ctx context.Context, g *gitcmd.Runner, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	head := make([]byte, binaryPeek)
	err := g.EachBlob(ctx, ids, func(i int, size int64, content io.Reader) error {
		n, err := io.ReadFull(content, head[:min(size, binaryPeek)])
		if err != nil {
			return fmt.Errorf("git cat-file: %w", err)
		}
		out[ids[i]] = bytes.IndexByte(head[:n], 0) >= 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// binaryFlags flags a regular file whose new content git shows only as
// "Binary files differ" when it was text before, or when its name says it
// is source code or text: a NUL byte is enough to hide a line from the
// review.
func binaryFlags(entries []Entry, binary map[string]bool) []Flag {
	var flags []Flag
	for _, e := range entries {
		if e.Status == 'D' || !regularMode(e.NewMode) || !binary[e.NewID] {
			continue
		}
		wasText := regularMode(e.OldMode) && !isZeroID(e.OldID) && !binary[e.OldID]
		if wasText || textName(e.Path) {
			flags = append(flags, Flag{Path: e.Path, Reason: "binary content in a text file: the diff hides it (git sandbox diff --text shows it)"})
		}
	}
	return flags
}

// binaryCandidates lists the blobs binaryFlags needs to know about.
func binaryCandidates(entries []Entry) []string {
	var ids []string
	seen := map[string]bool{}
	add := func(id string) {
		if !isZeroID(id) && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, e := range entries {
		if e.Status == 'D' || !regularMode(e.NewMode) {
			continue
		}
		add(e.NewID)
		if regularMode(e.OldMode) {
			add(e.OldID)
		}
	}
	return ids
}

func regularMode(m string) bool { return m == "100644" || m == "100755" }

func isZeroID(id string) bool { return strings.Trim(id, "0") == "" }

// textName reports whether a file name says its content is source code or
// text.
func textName(p string) bool {
	base := strings.ToLower(path.Base(p))
	switch base {
	case "makefile", "dockerfile", "jenkinsfile", "gemfile", "rakefile", "procfile", "vagrantfile", "license", "readme":
		return true
	}
	if strings.HasPrefix(base, ".") && !strings.Contains(base[1:], ".") {
		// Dotfiles (.bashrc, .npmrc, .envrc) are configuration text.
		return true
	}
	return textExtensions[strings.TrimPrefix(path.Ext(base), ".")]
}

var textExtensions = map[string]bool{}

func init() {
	for _, x := range strings.Fields(`c h cc cpp cxx hpp hh hxx m mm go rs py pyi rb js mjs cjs ts tsx jsx
		java kt kts scala groovy gradle swift cs fs vb php pl pm t sh bash zsh fish ps1 psm1 bat cmd lua r
		jl ex exs erl hrl hs ml mli clj cljs dart zig nim v sv vhd sql html htm xhtml css scss sass less
		vue svelte md markdown rst adoc txt json jsonc json5 yaml yml toml xml ini cfg conf properties env
		mk cmake bzl bazel nix tf hcl proto graphql gql csv tsv svg patch diff in am ac lock mod sum`) {
		textExtensions[x] = true
	}
}
