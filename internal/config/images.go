package config

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// ImageChoice is an image a repository names, and where it names it: its
// .sandbox.toml's image, a devcontainer.json's image, a FROM of its
// Dockerfile, a COPY --from or RUN --mount from= naming an image rather
// than a stage. Every one of them goes through Loaded.RefusedImages.
type ImageChoice struct {
	// Image is the reference as the repository wrote it (ARGs resolved).
	Image string `json:"image"`
	// File is the repository's file, as a path from its root; Line is
	// 1-based, 0 when not known.
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	// What says how the file names it: image, FROM, COPY --from,
	// RUN --mount from, ONBUILD COPY --from.
	What string `json:"what"`
}

// Where is "FILE line N (WHAT)", escaped for a terminal.
func (c ImageChoice) Where() string {
	s := termsafe.String(c.File)
	if c.Line > 0 {
		s += fmt.Sprintf(" line %d", c.Line)
	}
	return s + " (" + termsafe.String(c.What) + ")"
}

// ImageAllowed reports whether the user lets a repository choose image:
// an image the user's own configuration already names — the default
// image, the user's image setting, base_image (which the default image is
// built from, so an agent sees its files anyway) — or one listed in
// allowed_images. References are compared as the engine reads them
// (python and docker.io/library/python:latest are one image).
func (l *Loaded) ImageAllowed(image string) bool {
	trusted := append([]string{DefaultImage(), l.UserImage, l.BaseImage}, l.AllowedImages...)
	return slices.ContainsFunc(trusted, func(t string) bool { return t != "" && sameImage(t, image) })
}

// RefusedImages is the one image policy: of the images a repository names
// (its .sandbox.toml, its devcontainer.json and the Dockerfile that builds
// it), those the user has not allowed (ImageAllowed), in the order given.
// Start asks about them on a terminal and refuses without one; nothing is
// built or run from a repository's choice before this says yes.
func (l *Loaded) RefusedImages(choices []ImageChoice) []ImageChoice {
	var out []ImageChoice
	for _, c := range choices {
		if !l.ImageAllowed(c.Image) {
			out = append(out, c)
		}
	}
	return out
}

// RepoImageChoice is the image the repository's .sandbox.toml chose over
// the user's, with the line that chose it; nil when it chose none.
func (l *Loaded) RepoImageChoice() []ImageChoice {
	if l.RepoImage == "" {
		return nil
	}
	return []ImageChoice{{Image: l.RepoImage, File: RepoFile, Line: l.repoImageLine, What: "image"}}
}

// RefuseImages is the error for images the policy refused: msg says what
// did not happen ("not started"); the caller adds a hint of its own.
func RefuseImages(msg string, refused []ImageChoice) *usererr.Error {
	var names, where []string
	for _, c := range refused {
		names = append(names, termsafe.String(c.Image))
		where = append(where, termsafe.String(c.Image)+" from "+c.Where())
	}
	e := usererr.New("%s: the repository chooses %s, which you have not allowed: %s", msg, plural(len(refused), "an image", "images"), strings.Join(where, "; "))
	e = e.Hint("a repository may name any image of your engine, one with secrets in it too; if you trust %s, add %s to allowed_images in %s",
		plural(len(refused), "it", "them"), quoteList(names), UserPath())
	return e.WithCode(usererr.ExitRefused)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// sameImage reports whether two references name one image for the engine:
// equal as written, or equal once normalized (docker.io/library/ and
// :latest added). A reference that does not parse (an image id) matches
// only itself.
func sameImage(a, b string) bool {
	if a == b {
		return true
	}
	na, err := reference.ParseNormalizedNamed(a)
	if err != nil {
		return false
	}
	nb, err := reference.ParseNormalizedNamed(b)
	if err != nil {
		return false
	}
	return reference.TagNameOnly(na).String() == reference.TagNameOnly(nb).String()
}

var imageKey = regexp.MustCompile(`^\s*(image|"image"|'image')\s*=`)

// keyLine is the line of a top-level image key in a TOML file, 0 when not
// found.
func imageKeyLine(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "[") {
			return 0 // a table: no longer the top level
		}
		if imageKey.MatchString(line) {
			return n
		}
	}
	return 0
}
