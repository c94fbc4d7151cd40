package worktree

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func mkfile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// nestedTree makes a worktree with one nested repository of each kind,
// and things that are none.
func nestedTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	mkfile(t, filepath.Join(root, ".git"), "gitdir: /elsewhere\n") // the worktree's own
	mkfile(t, filepath.Join(root, "src", ".git", "config"), "[core]\n\tfsmonitor = evil\n")
	mkfile(t, filepath.Join(root, "src", ".git", "HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(root, "src", "deeper", ".git"), "gitdir: ../../x\n")
	mkfile(t, filepath.Join(root, "tools", "bare.git", "HEAD"), "ref: refs/heads/main\n")
	mkfile(t, filepath.Join(root, "tools", "bare.git", "objects", "x"), "")
	mkfile(t, filepath.Join(root, "tools", "bare.git", "refs", "x"), "")
	mkfile(t, filepath.Join(root, "docs", "HEAD"), "not a repository: no objects/ or refs/\n")
	mkfile(t, filepath.Join(root, "a.txt"), "a\n")
	if err := os.Symlink(filepath.Join(root, "src"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func paths(list []Nested) []string {
	var out []string
	for _, n := range list {
		out = append(out, n.Path)
	}
	slices.Sort(out)
	return out
}

func TestFindNested(t *testing.T) {
	root := nestedTree(t)
	got, err := FindNested(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"src/.git", "src/deeper/.git", "tools/bare.git/HEAD"}
	if !slices.Equal(paths(got), want) {
		t.Errorf("FindNested = %v, want %v", paths(got), want)
	}
	for _, n := range got {
		if n.Bare != (n.Path == "tools/bare.git/HEAD") {
			t.Errorf("%s: Bare = %v", n.Path, n.Bare)
		}
	}
}

func TestQuarantineAndRestore(t *testing.T) {
	root := nestedTree(t)
	dir := filepath.Join(t.TempDir(), "quarantine")
	list, err := Quarantine(root, dir, func(repo string) string {
		if repo == "src" {
			return "0123456789012345678901234567890123456789"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 {
		t.Fatalf("quarantined %v", paths(list))
	}
	if again, _ := FindNested(root); len(again) != 0 {
		t.Errorf("still found after quarantine: %v", paths(again))
	}
	rec, err := Quarantined(dir)
	if err != nil || len(rec) != 3 {
		t.Fatalf("record: %v %v", rec, err)
	}
	for _, n := range rec {
		if (n.Path == "src/.git") != (n.Gitlink != "") {
			t.Errorf("%s: gitlink %q", n.Path, n.Gitlink)
		}
	}
	// A second quarantine finds nothing new and keeps the record.
	if l, err := Quarantine(root, dir, nil); err != nil || len(l) != 3 {
		t.Errorf("second quarantine: %v %v", paths(l), err)
	}
	// A path taken meanwhile is not overwritten, and stays recorded.
	mkfile(t, filepath.Join(root, "src", "deeper", ".git"), "user's\n")
	restored, err := RestoreQuarantined(root, dir)
	if err == nil {
		t.Errorf("restore over an existing path: no error")
	}
	if len(restored) != 2 {
		t.Errorf("restored %v", paths(restored))
	}
	if b, _ := os.ReadFile(filepath.Join(root, "src", "deeper", ".git")); string(b) != "user's\n" {
		t.Errorf("restore overwrote the path in the way: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "src", ".git", "config")); string(b) != "[core]\n\tfsmonitor = evil\n" {
		t.Errorf("src/.git not restored whole: %q", b)
	}
	if left, _ := Quarantined(dir); len(left) != 1 || left[0].Path != "src/deeper/.git" {
		t.Errorf("left recorded: %v", paths(left))
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Remove(filepath.Join(root, "src", "deeper", ".git")))
	if r, err := RestoreQuarantined(root, dir); err != nil || len(r) != 1 {
		t.Errorf("restore after the way is clear: %v %v", paths(r), err)
	}
	if _, err := os.Stat(QuarantineRecord(dir)); !os.IsNotExist(err) {
		t.Errorf("the record is still there after everything was restored: %v", err)
	}
}
