package review

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseRaw(t *testing.T) {
	out := ":000000 120000 0000 1111 A\x00link\x00:100644 100755 2222 3333 M\x00run.sh\x00"
	got := parseRaw(out)
	if len(got) != 2 || got[0].Path != "link" || got[0].NewMode != "120000" || got[0].Status != 'A' || got[1].NewID != "3333" {
		t.Errorf("parseRaw = %+v", got)
	}
}

func TestFlags(t *testing.T) {
	entries := []Entry{
		{OldMode: "000000", NewMode: "120000", NewID: "l1", Status: 'A', Path: "key"},
		{OldMode: "000000", NewMode: "120000", NewID: "l2", Status: 'A', Path: "docs/ok"},
		{OldMode: "000000", NewMode: "160000", Status: 'A', Path: "vendor/sub"},
		{OldMode: "100644", NewMode: "100755", Status: 'M', Path: "build.sh"},
		{OldMode: "100755", NewMode: "100644", Status: 'M', Path: "tool"},
		{OldMode: "000000", NewMode: "100644", Status: 'A', Path: ".github/workflows/ci.yml"},
		{OldMode: "000000", NewMode: "100644", Status: 'A', Path: ".gitmodules"},
		{OldMode: "000000", NewMode: "100644", Status: 'A', Path: ".husky/pre-commit"},
		{OldMode: "100644", NewMode: "100644", Status: 'M', Path: "package.json"},
		{OldMode: "000000", NewMode: "100644", Status: 'A', Path: ".vscode/tasks.json"},
		{OldMode: "000000", NewMode: "100644", Status: 'A', Path: ".claude/settings.json"},
		{OldMode: "000000", NewMode: "100644", Status: 'A', Path: ".mcp.json"},
		{OldMode: "100644", NewMode: "000000", Status: 'D', Path: "old.txt"},
		{OldMode: "100644", NewMode: "100644", Status: 'M', Path: "src/main.go"},
	}
	targets := map[string]string{"l1": "/home/u/.ssh/id_rsa", "l2": "../README"}
	flags := Flags(entries, func(id string) string { return targets[id] })
	got := map[string]string{}
	for _, f := range flags {
		got[f.Path] += f.Reason + ";"
	}
	want := map[string]string{
		"key":                      "symlink to /home/u/.ssh/id_rsa (points outside the repository)",
		"docs/ok":                  "symlink to ../README",
		"vendor/sub":               "gitlink",
		"build.sh":                 "executable bit set",
		"tool":                     "executable bit removed",
		".github/workflows/ci.yml": "CI configuration",
		".gitmodules":              ".gitmodules",
		".husky/pre-commit":        "hooks",
		"package.json":             "package-manager",
		".vscode/tasks.json":       "editor settings",
		".claude/settings.json":    "agent settings",
		".mcp.json":                "agent settings",
	}
	for p, w := range want {
		if !strings.Contains(got[p], w) {
			t.Errorf("flag for %s = %q, want it to mention %q", p, got[p], w)
		}
	}
	if strings.Contains(got["docs/ok"], "outside") {
		t.Errorf("docs/ok -> ../README stays inside the repository: %q", got["docs/ok"])
	}
	for _, p := range []string{"old.txt", "src/main.go"} {
		if got[p] != "" {
			t.Errorf("%s flagged: %q", p, got[p])
		}
	}
}

func TestRenderEscapesAndHighlights(t *testing.T) {
	patch := "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-hello world\n+hello \x1b]52;c;x\x07there\n"
	var plain bytes.Buffer
	if err := Render(&plain, []byte(patch), false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b") {
		t.Errorf("plain output has an escape character: %q", plain.String())
	}
	if !strings.Contains(plain.String(), `+hello \x1b]52;c;x\x07there`) {
		t.Errorf("plain output = %q", plain.String())
	}
	var col bytes.Buffer
	if err := Render(&col, []byte(patch), true); err != nil {
		t.Fatal(err)
	}
	s := col.String()
	if strings.Contains(s, "\x1b]") || strings.Contains(s, "\x07") {
		t.Errorf("coloured output passes the agent's escape through: %q", s)
	}
	if !strings.Contains(s, redHi+"world"+reset) {
		t.Errorf("no word highlight for the removed word: %q", s)
	}
	if !strings.Contains(s, greenHi) {
		t.Errorf("no word highlight for the added words: %q", s)
	}
}

func TestTokens(t *testing.T) {
	got := strings.Join(tokens("a_b  c+d"), "|")
	if got != "a_b|  |c|+|d" {
		t.Errorf("tokens = %q", got)
	}
}

func TestRenderWords(t *testing.T) {
	patch := "diff --git a/a b/a\nindex 1..2 100644\n--- a/a\n+++ b/a\n@@ -1,2 +1,2 @@\n one \n-two\n+2\n  three\n~\n-gone\x1b[31m\n~\n"
	var b bytes.Buffer
	if err := RenderWords(&b, []byte(patch)); err != nil {
		t.Fatal(err)
	}
	want := bold + "diff --git a/a b/a" + reset + "\n" +
		bold + "index 1..2 100644" + reset + "\n" +
		bold + "--- a/a" + reset + "\n" +
		bold + "+++ b/a" + reset + "\n" +
		cyan + "@@ -1,2 +1,2 @@" + reset + "\n" +
		"one " + red + "[-two-]" + reset + green + "{+2+}" + reset + " three\n" +
		red + "[-gone\\x1b[31m-]" + reset + "\n"
	if got := b.String(); got != want {
		t.Errorf("RenderWords:\n%q\nwant\n%q", got, want)
	}
}
