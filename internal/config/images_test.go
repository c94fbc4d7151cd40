package config

import (
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// The one image policy: what the user's own config names (the default
// image, image, base_image, allowed_images) is allowed, compared as the
// engine reads references; anything else a repository names is refused.
func TestImagePolicy(t *testing.T) {
	l, err := Load(setup(t, "image = \"mine:1\"\nbase_image = \"debian:bookworm-slim\"\nallowed_images = [\"python:3.12\", \"ghcr.io/org/dev\"]\n", "image = \"secret:1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]bool{
		DefaultImage():                           true,
		"mine:1":                                 true,
		"docker.io/library/debian:bookworm-slim": true,
		"python:3.12":                            true,
		"docker.io/library/python:3.12":          true,
		"ghcr.io/org/dev:latest":                 true,
		"ghcr.io/org/dev":                        true,
		"python:3.13":                            false,
		"python":                                 false,
		"secret:1":                               false,
		"sha256:0123":                            false,
		"":                                       false,
	} {
		if got := l.ImageAllowed(image); got != want {
			t.Errorf("ImageAllowed(%q) = %v, want %v", image, got, want)
		}
	}
	choices := l.RepoImageChoice()
	if len(choices) != 1 || choices[0].Image != "secret:1" || choices[0].File != RepoFile || choices[0].Line != 1 {
		t.Fatalf("repository's choice %+v", choices)
	}
	refused := l.RefusedImages(append(choices, ImageChoice{Image: "python:3.12", File: "Dockerfile", Line: 1, What: "FROM"},
		ImageChoice{Image: "other", File: ".devcontainer/Dockerfile", Line: 4, What: "COPY --from"}))
	if len(refused) != 2 || refused[0].Image != "secret:1" || refused[1].Image != "other" {
		t.Fatalf("refused %+v", refused)
	}
	err = RefuseImages("not started", refused)
	ue, _ := usererr.As(err)
	if ue == nil || ue.Code != usererr.ExitRefused ||
		!strings.Contains(ue.Msg, "secret:1 from .sandbox.toml line 1 (image); other from .devcontainer/Dockerfile line 4 (COPY --from)") ||
		!strings.Contains(strings.Join(ue.Hints, "\n"), `to allowed_images in`) || !strings.Contains(strings.Join(ue.Hints, "\n"), `["secret:1", "other"]`) {
		t.Errorf("refusal %+v", ue)
	}
}

// Without a user config, only the default image and the default
// base_image are allowed; a repository's image in a table is not the
// top-level key's line.
func TestImagePolicyDefaults(t *testing.T) {
	l, err := Load(setup(t, "", "# a comment\nagent = \"shell\"\n\nimage = \"x:1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !l.ImageAllowed(DefaultImage()) || !l.ImageAllowed(DefaultBaseImage) || l.ImageAllowed("x:1") || l.ImageAllowed("debian") {
		t.Errorf("defaults allow the wrong images")
	}
	if c := l.RepoImageChoice(); len(c) != 1 || c[0].Line != 4 {
		t.Errorf("choice %+v", c)
	}
}
