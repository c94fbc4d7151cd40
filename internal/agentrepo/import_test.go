package agentrepo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// packOf builds, in a scratch repository made by the test (standing in for
// the engine's helper), a tree from name -> content entries written with
// mktree (so names git add would refuse can be made), and returns the tree
// and a pack of everything it holds.
func packOf(t *testing.T, entries map[string]string, modes map[string]string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, nil, "init", "-q", "--bare", ".")
	var list strings.Builder
	for name, content := range entries {
		cmd := exec.Command("git", "hash-object", "-w", "--stdin")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+dir)
		cmd.Stdin = strings.NewReader(content)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		mode := modes[name]
		if mode == "" {
			mode = "100644"
		}
		list.WriteString(mode + " blob " + strings.TrimSpace(string(out)) + "\t" + name + "\n")
	}
	cmd := exec.Command("git", "mktree")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+dir)
	cmd.Stdin = strings.NewReader(list.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	tree := strings.TrimSpace(string(out))
	cmd = exec.Command("git", "pack-objects", "--revs", "--stdout", "-q")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_DIR="+dir)
	cmd.Stdin = strings.NewReader(tree + "\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return tree, pack
}

func userRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, nil, "init", "-q", ".")
	return filepath.Join(dir, ".git")
}

func has(t *testing.T, common, id string) bool {
	t.Helper()
	cmd := exec.Command("git", "--git-dir", common, "cat-file", "-e", id)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	return cmd.Run() == nil
}

func quarantinesLeft(t *testing.T, common string) []string {
	t.Helper()
	ents, _ := os.ReadDir(filepath.Join(common, "objects"))
	var left []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "incoming-") {
			left = append(left, e.Name())
		}
	}
	return left
}

func TestImportTreeTakesACheckedTree(t *testing.T) {
	common := userRepo(t)
	tree, pack := packOf(t, map[string]string{"a.txt": "a\n", "run.sh": "#!/bin/sh\n"}, map[string]string{"run.sh": "100755"})
	_, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: tree, Budget: DefaultBudget})
	if err != nil {
		t.Fatal(err)
	}
	if !has(t, common, tree) {
		t.Error("the tree is not in the user's store")
	}
	if left := quarantinesLeft(t, common); len(left) > 0 {
		t.Errorf("quarantine left: %q", left)
	}
}

func TestImportTreeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries map[string]string
		modes   map[string]string
		budget  Budget
		claim   string // the tree the helper says it sent, when not the real one
	}{
		{name: "a .GIT entry", entries: map[string]string{".GIT": "x\n"}},
		{name: "git~1", entries: map[string]string{"GIT~1": "x\n"}},
		{name: "a hostile .gitmodules", entries: map[string]string{".gitmodules": "[submodule \"a\"]\n\tpath = a\n\turl = --upload-pack=evil\n"}},
		{name: "a file over the object budget", entries: map[string]string{"big": strings.Repeat("x", 4096)}, budget: Budget{MaxObject: 1024}},
		{name: "a pack over the total budget", entries: map[string]string{"big": strings.Repeat("x", 1<<16) + "random-ish"}, budget: Budget{MaxTotal: 64}},
		{name: "a tree the pack does not hold", entries: map[string]string{"a": "a\n"}, claim: "1111111111111111111111111111111111111111"},
		{name: "not an object id", entries: map[string]string{"a": "a\n"}, claim: "HEAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			common := userRepo(t)
			tree, pack := packOf(t, tc.entries, tc.modes)
			claim := tree
			if tc.claim != "" {
				claim = tc.claim
			}
			_, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: claim, Budget: tc.budget})
			if err == nil {
				t.Fatalf("accepted")
			}
			if has(t, common, tree) {
				t.Errorf("the refused tree %s is in the user's store (%v)", tree, err)
			}
			if left := quarantinesLeft(t, common); len(left) > 0 {
				t.Errorf("quarantine left: %q", left)
			}
			var be *budgetError
			if tc.budget != (Budget{}) && !errors.As(err, &be) {
				t.Errorf("budget refusal is %v, want a budget error", err)
			}
		})
	}
}

// An incremental import checks what differs from the known tree: a good
// change is taken, a .GIT entry next to known files is refused.
func TestImportTreeIncremental(t *testing.T) {
	common := userRepo(t)
	base := map[string]string{"a.txt": "a\n", "b.txt": "b\n"}
	known, pack := packOf(t, base, nil)
	if _, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: known, Budget: DefaultBudget}); err != nil {
		t.Fatal(err)
	}
	good := map[string]string{"a.txt": "a2\n", "b.txt": "b\n", "c.txt": "c\n"}
	tree, pack := packOf(t, good, nil)
	if _, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: tree, Known: known, Budget: DefaultBudget}); err != nil {
		t.Fatalf("a good change was refused: %v", err)
	}
	bad := map[string]string{"a.txt": "a\n", "b.txt": "b\n", ".GIT": "x\n"}
	tree, pack = packOf(t, bad, nil)
	if _, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: tree, Known: known, Budget: DefaultBudget}); err == nil {
		t.Fatal("a .GIT entry next to known files was taken")
	}
	big := map[string]string{"a.txt": "a\n", "b.txt": strings.Repeat("b", 5000)}
	tree, pack = packOf(t, big, nil)
	_, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: tree, Known: known, Budget: Budget{MaxObject: 1000}})
	var be *budgetError
	if !errors.As(err, &be) {
		t.Fatalf("a changed file over the budget: %v", err)
	}
}

// A quarantine an import killed midway left is removed by the next import
// once it is an hour old; a fresh one (another import's) is left alone.
func TestImportTreeRemovesStaleQuarantines(t *testing.T) {
	common := userRepo(t)
	stale := filepath.Join(common, "objects", "incoming-sandbox-stale")
	fresh := filepath.Join(common, "objects", "incoming-sandbox-fresh")
	for _, d := range []string{stale, fresh} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	tree, pack := packOf(t, map[string]string{"a": "a\n"}, nil)
	if _, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: tree}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale quarantine is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh quarantine was removed: %v", err)
	}
}

// An incremental import says what differs from the known tree, file by
// file, with the size of each blob it now has; a first import (no known
// tree) says nothing.
func TestImportTreeSaysWhatChanged(t *testing.T) {
	common := userRepo(t)
	known, pack := packOf(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "same.txt": "s\n"}, nil)
	changes, err := ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: known, Budget: DefaultBudget})
	if err != nil || changes != nil {
		t.Fatalf("a first import: %v, %v", changes, err)
	}
	tree, pack := packOf(t, map[string]string{"a.txt": "a two\n", "c.txt": "c\n", "same.txt": "s\n"}, map[string]string{"a.txt": "100755"})
	changes, err = ImportTree(context.Background(), ImportOptions{CommonDir: common, Pack: bytes.NewReader(pack), Tree: tree, Known: known, Budget: DefaultBudget})
	if err != nil {
		t.Fatal(err)
	}
	id := func(content string) string {
		f := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return git(t, filepath.Dir(f), nil, "hash-object", f)
	}
	want := []TreeChange{
		{Path: "a.txt", OldMode: "100644", OldID: id("a\n"), NewMode: "100755", NewID: id("a two\n"), Size: 6},
		{Path: "b.txt", OldMode: "100644", OldID: id("b\n")},
		{Path: "c.txt", NewMode: "100644", NewID: id("c\n"), Size: 2},
	}
	if !slices.Equal(changes, want) {
		t.Errorf("changes:\n%+v\nwant\n%+v", changes, want)
	}
}
