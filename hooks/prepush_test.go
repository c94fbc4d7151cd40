package hooks

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/verify"
)

// pushRepo is a repository with a history on main, for the hook to read.
type pushRepo struct {
	t   *testing.T
	dir string
	g   *gitcmd.Runner
	// sandboxes are the sandbox branches, by name.
	sandboxes map[string]*fakeSandbox
	// engine runs the verify containers; prepared counts the runs.
	engine   *enginefake.Engine
	prepared []PushRun
}

func newPushRepo(t *testing.T) *pushRepo {
	t.Helper()
	dir := t.TempDir()
	r := &pushRepo{t: t, dir: dir, g: &gitcmd.Runner{GitDir: filepath.Join(dir, ".git"), WorkTree: dir}, sandboxes: map[string]*fakeSandbox{}}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *pushRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes file and commits it with subject; it returns the commit.
func (r *pushRepo) commit(file, body, subject string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, file), []byte(body), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", subject)
	return r.git("rev-parse", "HEAD")
}

func (r *pushRepo) Git() *gitcmd.Runner { return r.g }

func (r *pushRepo) Sandbox(branch string) (Sandbox, bool, error) {
	if branch == "broken" {
		return nil, false, errors.New("record unreadable")
	}
	sb, ok := r.sandboxes[branch]
	return sb, ok, nil
}

func (r *pushRepo) PrepareVerify(_ context.Context, run PushRun) (verify.Options, func(), error) {
	r.prepared = append(r.prepared, run)
	work := r.t.TempDir()
	return verify.Options{
		Engine: r.engine, CommonDir: r.g.GitDir, Image: "img", Name: "pv-" + run.Commit[:12],
		Labels:  map[string]string{container.LabelManaged: "1", container.LabelRole: container.RoleVerify},
		Network: container.NetworkNone, Limits: container.Limits{Pids: 64}, UID: os.Getuid(), GID: os.Getgid(),
		WorkDir: filepath.Join(work, "tree"), Stdout: run.Out, Stderr: run.Out,
	}, func() {}, nil
}

type fakeSandbox struct {
	running  bool
	err      error
	engine   string
	verdicts map[string]record.Verdict
}

func (s *fakeSandbox) Running(context.Context) (bool, error) { return s.running, s.err }
func (s *fakeSandbox) Verdict(tree string) (record.Verdict, bool) {
	v, ok := s.verdicts[tree]
	return v, ok
}
func (s *fakeSandbox) Recorded() *record.Record { return &record.Record{Engine: s.engine} }

var zero = strings.Repeat("0", 40)

func TestCheck(t *testing.T) {
	r := newPushRepo(t)
	c1 := r.commit("a", "1", "one")
	tree := r.git("rev-parse", c1+"^{tree}")
	r.sandboxes["busy"] = &fakeSandbox{running: true}
	r.sandboxes["lost"] = &fakeSandbox{err: errors.New("no engine"), engine: "far"}
	r.sandboxes["local"] = &fakeSandbox{err: errors.New("no daemon")}
	r.sandboxes["failed"] = &fakeSandbox{verdicts: map[string]record.Verdict{tree: {OK: false, ExitCode: 2}}}
	r.sandboxes["passed"] = &fakeSandbox{verdicts: map[string]record.Verdict{tree: {OK: true}}}
	up := func(local, remote string) Update {
		return Update{LocalRef: local, LocalSHA: c1, RemoteRef: remote, RemoteSHA: zero}
	}
	updates := []Update{
		up("refs/sandbox/t1/rescue", "refs/sandbox/t1/rescue"),
		up("refs/heads/main", "refs/sandbox/x"),
		{LocalRef: "(delete)", LocalSHA: zero, RemoteRef: "refs/heads/busy", RemoteSHA: c1},
		up("refs/tags/v1", "refs/tags/v1"),
		up("refs/heads/main", "refs/heads/main"),
		up("refs/heads/busy", "refs/heads/busy"),
		up("refs/heads/lost", "refs/heads/lost"),
		up("refs/heads/local", "refs/heads/local"),
		up("refs/heads/failed", "refs/heads/failed"),
		up("refs/heads/passed", "refs/heads/passed"),
		up("refs/heads/broken", "refs/heads/broken"),
	}
	got := Check(context.Background(), r, updates)
	want := []struct{ ref, reason, hint string }{
		{"refs/sandbox/t1/rescue", "never leave", "rescue restore"},
		{"refs/sandbox/x", "never leave", "push a branch"},
		{"refs/heads/busy", "still running", "git sandbox wait busy"},
		{"refs/heads/lost", "cannot be told: no engine", "make engine far answer"},
		{"refs/heads/local", "cannot be told: no daemon", "start Docker"},
		{"refs/heads/failed", "exit code 2", "git sandbox verify failed"},
	}
	if len(got) != len(want) {
		t.Fatalf("Check refused %d refs, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Ref != w.ref || !strings.Contains(got[i].Reason, w.reason) || !strings.Contains(got[i].Hint, w.hint) {
			t.Errorf("refusal %d = %+v, want %s: …%s… (hint …%s…)", i, got[i], w.ref, w.reason, w.hint)
		}
	}
}

func TestPushedCommits(t *testing.T) {
	ctx := context.Background()
	r := newPushRepo(t)
	c1 := r.commit("a", "1", "one")
	c2 := r.commit("a", "2", "two")
	c3 := r.commit("b", "3", "three")
	// c4 has c3's tree: one run covers both.
	r.git("commit", "-q", "--allow-empty", "-m", "four, same tree")
	c4 := r.git("rev-parse", "HEAD")

	// The remote had c1: c2, c3 are verified, oldest first; c4 shares c3's
	// tree.
	list, tipOnly, err := PushedCommits(ctx, r, []Update{{LocalRef: "refs/heads/main", LocalSHA: c4, RemoteRef: "refs/heads/main", RemoteSHA: c1}}, "")
	if err != nil || len(tipOnly) != 0 {
		t.Fatalf("PushedCommits = %v, %v", tipOnly, err)
	}
	if len(list) != 2 || list[0].Commit != c2 || list[1].Commit != c3 || list[0].Subject != "two" || list[1].of != 2 {
		t.Errorf("pushed = %+v, want two then three", list)
	}

	// A new ref on a remote the repository knows nothing of: the tip only.
	list, tipOnly, err = PushedCommits(ctx, r, []Update{{LocalRef: "refs/heads/main", LocalSHA: c4, RemoteRef: "refs/heads/new", RemoteSHA: zero}}, "origin")
	if err != nil || len(list) != 1 || list[0].Commit != c4 || len(tipOnly) != 1 {
		t.Errorf("unknown remote: %+v, %v, %v", list, tipOnly, err)
	}

	// What the remote's tracking refs hold is not verified again; an old
	// value the repository does not have is passed over.
	r.git("update-ref", "refs/remotes/origin/main", c2)
	list, _, err = PushedCommits(ctx, r, []Update{{LocalRef: "refs/heads/main", LocalSHA: c4, RemoteRef: "refs/heads/new", RemoteSHA: strings.Repeat("e", 40)}}, "origin")
	if err != nil || len(list) != 1 || list[0].Commit != c3 {
		t.Errorf("tracking refs: %+v, %v", list, err)
	}

	// Deletions and tags are not verified; a URL as the remote names no
	// tracking refs; a malformed id is an error.
	list, _, err = PushedCommits(ctx, r, []Update{
		{LocalRef: "(delete)", LocalSHA: zero, RemoteRef: "refs/heads/x", RemoteSHA: c1},
		{LocalRef: "refs/tags/v1", LocalSHA: c1, RemoteRef: "refs/tags/v1", RemoteSHA: zero},
	}, "https://example.invalid/r.git")
	if err != nil || len(list) != 0 {
		t.Errorf("deletions and tags: %+v, %v", list, err)
	}
	if _, _, err := PushedCommits(ctx, r, []Update{{LocalRef: "refs/heads/main", LocalSHA: "nope", RemoteRef: "refs/heads/main", RemoteSHA: zero}}, ""); err == nil {
		t.Error("a malformed id was accepted")
	}
}

func TestVerifyPushed(t *testing.T) {
	ctx := context.Background()
	r := newPushRepo(t)
	c1 := r.commit("a", "1", "one")
	c2 := r.commit("a", "2", "two")
	c3 := r.commit("a", "3", "three")
	r.engine = enginefake.New("img")
	ran := 0
	r.engine.OnStart = func(enginefake.Container) (int, bool) {
		ran++
		if ran == 1 {
			return 0, true
		}
		return 7, true
	}
	var out bytes.Buffer
	cfg := &config.Loaded{}
	cfg.Verify = "make check"
	o := VerifyOptions{Config: cfg, UI: ui.New(&out, ui.Options{NoColor: true})}
	updates := []Update{{LocalRef: "refs/heads/main", LocalSHA: c3, RemoteRef: "refs/heads/main", RemoteSHA: c1}}
	refused, err := VerifyPushed(ctx, r, updates, o)
	if err != nil || len(refused) != 1 {
		t.Fatalf("VerifyPushed = %+v, %v", refused, err)
	}
	if !strings.Contains(refused[0].Reason, gitcmd.Hash(c3).Short()) || !strings.Contains(refused[0].Reason, "exit code 7") || !strings.Contains(refused[0].Hint, "rebase") {
		t.Errorf("refusal = %+v", refused[0])
	}
	if len(r.prepared) != 2 || r.prepared[0].Commit != c2 || r.prepared[1].Commit != c3 {
		t.Errorf("runs = %+v, want two then three", r.prepared)
	}
	for _, want := range []string{"verifying 2 pushed commits", "[1/2]", "[2/2]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := len(r.engine.Containers()); n != 0 {
		t.Errorf("%d verify containers left", n)
	}

	// No verify command: a warning, and the push goes.
	out.Reset()
	cfg.Verify = ""
	if refused, err := VerifyPushed(ctx, r, updates, o); err != nil || refused != nil || !strings.Contains(out.String(), "no verify command") {
		t.Errorf("no verify: %+v, %v, %q", refused, err, out.String())
	}
}

func TestProgress(t *testing.T) {
	if progress(0, 1) != "" || progress(1, 3) != " [2/3]" {
		t.Error("progress")
	}
}
