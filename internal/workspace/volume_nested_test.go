package workspace

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// helperOnDisk is a fake engine whose helper runs its scripts here with
// sh, its volumes being directories of a test's.
func helperOnDisk(t *testing.T) (*Volume, string, string) {
	t.Helper()
	dir := t.TempDir()
	ws, state := filepath.Join(dir, "ws"), filepath.Join(dir, "state")
	for _, d := range []string{ws, state, filepath.Join(dir, "sb")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := enginefake.New("img")
	f.OnExec = func(_ enginefake.Container, o container.ExecOptions) int {
		argv := append([]string(nil), o.Argv...)
		argv[2] = strings.NewReplacer(container.Workspace, ws, copyState, state).Replace(argv[2])
		for i := 4; i < len(argv); i++ {
			argv[i] = strings.Replace(argv[i], copyState, state, 1)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Streams.Stdin, o.Streams.Stdout, o.Streams.Stderr
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return ee.ExitCode()
			}
			t.Error(err)
			return 1
		}
		return 0
	}
	c := VolumeNames("sb")
	spec := HelperSpec(c, "sb", &container.Spec{Image: "img", User: "1:1", Labels: map[string]string{}})
	ctx := context.Background()
	id, err := f.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	env := &Env{
		Layout: worktree.Layout{Root: dir, RepoID: "."},
		Engine: func(context.Context) (Engine, error) { return f, nil },
	}
	return &Volume{env: env, rec: &record.Record{Branch: "sb", Copy: &c}}, ws, state
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Copy mode's quarantine finds what worktree.FindNested finds, moves it
// into the helper's volume, records it on this machine, and puts it back.
func TestVolumeQuarantine(t *testing.T) {
	if _, err := exec.LookPath("find"); err != nil {
		t.Skip("no find")
	}
	v, ws, state := helperOnDisk(t)
	write(t, filepath.Join(ws, ".git"), "gitdir: /sandbox/git\n")
	write(t, filepath.Join(ws, "src/.git/config"), "[core]\n\tfsmonitor = evil\n")
	write(t, filepath.Join(ws, "src/a.txt"), "a\n")
	write(t, filepath.Join(ws, "sub/deep/.git"), "gitdir: ../x\n")
	write(t, filepath.Join(ws, "tools/bare/HEAD"), "ref: refs/heads/main\n")
	for _, d := range []string{"tools/bare/objects", "tools/bare/refs", "notbare/objects"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(ws, "notbare/HEAD"), "x\n")
	if err := os.Symlink(filepath.Join(ws, "src"), filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	want, err := worktree.FindNested(ws)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := v.Quarantine(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := worktree.Quarantined(v.env.Layout.Quarantine("sb"))
	if err != nil || len(list) != len(want) || len(list) != 3 {
		t.Fatalf("quarantined %+v (%v), want %+v", list, err, want)
	}
	for i, n := range list {
		if n.Path != want[i].Path || n.Bare != want[i].Bare || !strings.HasPrefix(n.Kept, copyQuarantine+"/") {
			t.Errorf("entry %d = %+v, want %+v kept in the helper's volume", i, n, want[i])
		}
		if _, err := os.Lstat(filepath.Join(ws, n.Path)); err == nil {
			t.Errorf("%s is still in the worktree", n.Path)
		}
		if _, err := os.Lstat(strings.Replace(n.Kept, copyState, state, 1)); err != nil {
			t.Errorf("%s is not kept: %v", n.Path, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git")); err != nil {
		t.Errorf("the worktree's own .git was moved")
	}
	// Again: nothing more to move.
	if err := v.Quarantine(ctx); err != nil {
		t.Fatal(err)
	}
	// A place taken is refused, and the entry stays kept.
	write(t, filepath.Join(ws, "sub/deep/.git"), "mine\n")
	restored, err := v.Unquarantine(ctx)
	if err == nil || !strings.Contains(err.Error(), "sub/deep/.git exists") || len(restored) != 2 {
		t.Errorf("unquarantine over a taken place = %+v, %v", restored, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src/.git/config")); !strings.Contains(string(b), "fsmonitor") {
		t.Errorf("src/.git did not come back whole")
	}
	if left, _ := worktree.Quarantined(v.env.Layout.Quarantine("sb")); len(left) != 1 || left[0].Path != "sub/deep/.git" {
		t.Errorf("left quarantined: %+v", left)
	}
}
