package devcontainer

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/config"
)

// imagesOf is "WHAT IMAGE@LINE" for each image a scan found.
func imagesOf(cs []config.ImageChoice) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s@%d", c.What, c.Image, c.Line))
	}
	return strings.Join(out, ", ")
}

// Every image a Dockerfile names is found where the engine would find it,
// with its line; stages and scratch are not images.
func TestScanDockerfileFindsEveryImage(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		file string
		args map[string]string
		want string
	}{
		"one FROM":          {"FROM debian:12\nRUN true\n", nil, "FROM debian:12@1"},
		"lower case":        {"from  debian:12  as  b\ncopy --from=b /x /y\n", nil, "FROM debian:12@1"},
		"platform flag":     {"FROM --platform=linux/amd64 img AS x\n", nil, "FROM img@1"},
		"scratch":           {"FROM scratch\nCOPY a /a\n", nil, ""},
		"stages by name":    {"FROM a AS build\nFROM build\nCOPY --from=build /x /x\nCOPY --from=BUILD /y /y\n", nil, "FROM a@1"},
		"stage by number":   {"FROM a\nFROM b\nCOPY --from=0 /x /x\n", nil, "FROM a@1, FROM b@2"},
		"copy from image":   {"FROM a\nCOPY --chown=1:1 --from=secret:1 /key /key\n", nil, "FROM a@1, COPY --from secret:1@2"},
		"quoted from":       {"FROM a\nCOPY --from=\"secret:1\" /key /key\n", nil, "FROM a@1, COPY --from secret:1@2"},
		"later stage name":  {"FROM a\nCOPY --from=later /x /x\nFROM b AS later\n", nil, "FROM a@1, COPY --from later@2, FROM b@3"},
		"run mount from":    {"FROM a\nRUN --mount=type=bind,from=secret:1,target=/s cat /s/key\n", nil, "FROM a@1, RUN --mount from secret:1@2"},
		"run mount stage":   {"FROM a AS s\nFROM b\nRUN --mount=from=s,target=/s true\n", nil, "FROM a@1, FROM b@2"},
		"onbuild copy":      {"FROM a\nONBUILD COPY --from=secret:1 /key /key\n", nil, "FROM a@1, ONBUILD COPY --from secret:1@2"},
		"onbuild stage":     {"FROM a AS s\nFROM b\nONBUILD COPY --from=s /x /x\n", nil, "FROM a@1, FROM b@2, ONBUILD COPY --from s@3"},
		"continuation":      {"FROM a\nRUN echo \\\n  one \\\n# a comment\n\n  two\nCOPY \\\n --from=secret:1 /k /k\n", nil, "FROM a@1, COPY --from secret:1@7"},
		"continued FROM":    {"FROM \\\n secret:1\n", nil, "FROM secret:1@1"},
		"escape directive":  {"# escape=`\nFROM a\nRUN echo \\\nFROM secret:1\n", nil, "FROM a@2, FROM secret:1@4"},
		"escape continues":  {"# escape=`\nFROM a\nRUN echo `\nFROM secret:1\n", nil, "FROM a@2"},
		"syntax, escape":    {"# syntax=docker/dockerfile:1\n# escape=`\nFROM a\nRUN echo \\\nFROM secret:1\n", nil, "FROM a@3, FROM secret:1@5"},
		"lone escape line":  {"FROM a\nRUN echo \\\n\\\nFROM secret:1\n", nil, "FROM a@1"},
		"late directive":    {"FROM a\n# escape=`\nRUN echo \\\nFROM secret:1\n", nil, "FROM a@1"},
		"indented comment":  {"  # FROM secret:1\nFROM a\n", nil, "FROM a@2"},
		"crlf":              {"FROM a\r\nCOPY --from=secret:1 /k /k\r\n", nil, "FROM a@1, COPY --from secret:1@2"},
		"meta arg default":  {"ARG BASE=debian:12\nFROM ${BASE}\n", nil, "FROM debian:12@2"},
		"meta arg quoted":   {"ARG V=\"3.12\"\nFROM python:$V\n", nil, "FROM python:3.12@2"},
		"build arg wins":    {"ARG BASE=debian:12\nFROM $BASE\n", map[string]string{"BASE": "secret:1"}, "FROM secret:1@2"},
		"arg without value": {"ARG BASE\nFROM ${BASE}\n", map[string]string{"BASE": "secret:1"}, "FROM secret:1@2"},
		"default operator":  {"ARG TAG\nFROM img:${TAG:-1}\n", nil, "FROM img:1@2"},
		"plus operator":     {"ARG P=yes\nFROM ${P:+secret}img\n", nil, "FROM secretimg@2"},
		"unset variable":    {"FROM ${NOTHING}img\n", nil, "FROM img@1"},
		"stage arg ignored": {"FROM a\nARG BASE=secret:1\nFROM b\n", nil, "FROM a@1, FROM b@3"},
		"multi-arg":         {"ARG A=x B=secret:1\nFROM $B\n", nil, "FROM secret:1@2"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ScanDockerfile(".devcontainer/Dockerfile", []byte(tc.file), tc.args)
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			if s := imagesOf(got); s != tc.want {
				t.Errorf("images %q, want %q", s, tc.want)
			}
			for _, c := range got {
				if c.File != ".devcontainer/Dockerfile" {
					t.Errorf("file %q", c.File)
				}
			}
		})
	}
}

// What cannot be read as the engine would is refused, naming the line.
func TestScanDockerfileRefusesWhatItCannotResolve(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		file string
		args map[string]string
		want string
	}{
		"unresolved default": {"ARG B=${A}\nFROM $B\n", nil, "line 2: the image of FROM $B cannot be resolved"},
		"undeclared arg":     {"FROM $B\n", map[string]string{"B": "x"}, "no ARG before the first FROM declares it"},
		"proxy arg":          {"ARG HTTP_PROXY\nFROM ${HTTP_PROXY:+secret}img\n", nil, "set by git sandbox"},
		"declared twice":     {"ARG B=secret:1\nARG B\nFROM ${B:-a}\n", nil, "ARG B is declared twice"},
		"quotes":             {"FROM \"secret:1\"\n", nil, "quotes or escapes"},
		"other operator":     {"ARG B=x\nFROM ${B%x}img\n", nil, "cannot be resolved"},
		"empty":              {"ARG B\nFROM ${B}\n", nil, "it is empty"},
		"variable in from":   {"FROM a\nCOPY --from=$X /k /k\n", nil, "line 2: COPY --from=$X uses a variable"},
		"bad escape":         {"# escape=x\nFROM a\n", nil, "escape directive"},
		"escaped escape":     {"FROM a\nRUN echo \\\\ \nFROM secret:1\n", nil, "line 2 ends in an escaped \\"},
		"escaped backtick":   {"# escape=`\nFROM a\nRUN echo ``\nFROM secret:1\n", nil, "line 3 ends in an escaped `"},
		"escape after check": {"# check=skip=all\n# escape=`\nFROM a\n", nil, "line 2: an escape directive after a check directive"},
		"two escapes":        {"# escape=`\n# escape=\\\\\nFROM a\n", nil, "line 2: a second escape directive"},
		"not FROM form":      {"FROM a b\n", nil, "line 1: FROM \"a b\" is not FROM IMAGE [AS NAME]"},
		"add url":            {"FROM a\nADD https://example.com/x /x\n", nil, "line 2: ADD https://example.com/x: the engine would download it itself"},
		"add url json":       {"FROM a\nADD [\"http://172.17.0.1:8080/k\", \"/k\"]\n", nil, "the engine would download it itself"},
		"add variable":       {"FROM a\nARG U=http://x/\nADD $U /x\n", nil, "line 3: ADD $U"},
		"onbuild add url":    {"FROM a\nONBUILD ADD http://x/k /k\n", nil, "line 2: ADD http://x/k"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ScanDockerfile(".devcontainer/Dockerfile", []byte(tc.file), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), ".devcontainer/Dockerfile") {
				t.Errorf("error %v, want it to name the file and say %q", err, tc.want)
			}
		})
	}
	if _, err := ScanDockerfile("Dockerfile", []byte("FROM a\nADD local.tar /x\nADD [\"a b\", \"/c\"]\n"), nil); err != nil {
		t.Errorf("ADD of the context's files: %v", err)
	}
}

func TestBuilderFlags(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"--from=a /x /y":               "--from=a|/x /y",
		`--from="a b" --chown=1 x y`:   "--from=a b,--chown=1|x y",
		`--from='a' -- --x y`:          "--from=a|--x y",
		"/x /y":                        "|/x /y",
		`--from=a\ b x`:                "--from=a b|x",
		"--mount=type=bind,from=s cmd": "--mount=type=bind,from=s|cmd",
	} {
		rest, flags := builderFlags(line)
		if got := strings.Join(flags, ",") + "|" + strings.TrimSpace(rest); got != want {
			t.Errorf("builderFlags(%q) = %q, want %q", line, got, want)
		}
	}
}

// ImageChoices: a named image with its line in devcontainer.json, or the
// Dockerfile's images with build.args; features name none (never fetched).
func TestImageChoices(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"image": {map[string]string{".devcontainer.json": "{\n  // the image\n  \"image\": \"secret:1\",\n  \"features\": {\"ghcr.io/devcontainers/features/go:1\": {}}\n}\n"}, "image secret:1@3"},
		"build": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "args": {"BASE": "secret:1"}}, "features": {"ghcr.io/x/y:1": {}}}`,
			".devcontainer/Dockerfile":        "ARG BASE=debian:12\nFROM $BASE AS b\nFROM debian:12\nCOPY --from=other:2 /k /k\n",
		}, "FROM secret:1@2, FROM debian:12@3, COPY --from other:2@4"},
	} {
		t.Run(name, func(t *testing.T) {
			// A repository each: the cases' files must not meet.
			r := newRepo(t)
			commit := r.commit(tc.files)
			c, err := r.load(commit)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.ImageChoices(context.Background(), Source{Git: r.g, Commit: commit})
			if err != nil {
				t.Fatal(err)
			}
			if s := imagesOf(got); s != tc.want {
				t.Errorf("choices %q, want %q", s, tc.want)
			}
			if name == "image" && got[0].File != ".devcontainer.json" {
				t.Errorf("file %q", got[0].File)
			}
		})
	}
}
