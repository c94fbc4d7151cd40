package doctor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	enginefake "github.com/git-sandbox/git-sandbox/container/fake"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/mcp"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/testenv"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

func TestMib(t *testing.T) {
	for n, want := range map[int64]string{0: "0 KiB", 5000: "5 KiB", 1 << 20: "1.0 MiB", 66 << 20: "66.0 MiB"} {
		if got := mib(n); got != want {
			t.Errorf("mib(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMain keeps the tests away from the user's git configuration and
// state.
func TestMain(m *testing.M) { testenv.Main(m, "doctor") }

// newEnv is a repository with one commit and its environment, every
// engine the fake.
func newEnv(t *testing.T, f *enginefake.Engine) *sandbox.Env {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "initial"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	repo, err := worktree.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.Agent, cfg.Network = "shell", container.NetworkAllowlist
	cfg.Engines = []config.Engine{{Name: "remote", Host: "tcp://remote.invalid:2376", Mode: "copy"}}
	env := sandbox.NewEnv(repo, cfg, t.TempDir(), ui.Discard())
	engines.Override = func(context.Context, string) (container.Engine, error) { return f, nil }
	t.Cleanup(func() { engines.Override = nil })
	return env
}

// Doctor on the fake engine: a line for each check, a FAIL with its hint
// for what is missing (an allowlist network without a static binary for
// the proxy, an mcp server that does not answer), and the count.
func TestDoctorReportsEachCheck(t *testing.T) {
	f := enginefake.New(config.DefaultImage())
	env := newEnv(t, f)
	var out bytes.Buffer
	doc := &Doctor{
		Ctx: context.Background(), Out: &out,
		ProxyBinary: func(string) (proxyimage.Binary, error) {
			return proxyimage.Binary{}, usererr.New("this git-sandbox is linked dynamically").Hint("build it with CGO_ENABLED=0")
		},
		MCPCheck: func(context.Context, string, io.Writer) (*mcp.Checked, error) {
			return nil, errors.New("initialize: EOF")
		},
	}
	failed := doc.Run(env, nil)
	got := out.String()
	for _, want := range []string{
		"ok   git: ", "ok   user config: ", "ok   repository: " + env.Repo.MainWorkTree,
		"ok   state directory: ", "ok   docker: fake engine", "ok   image: " + config.DefaultImage(),
		"FAIL egress proxy: this git-sandbox is linked dynamically\n     hint: build it with CGO_ENABLED=0",
		"ok   engine remote: fake engine, copy mode",
		"FAIL mcp: initialize: EOF\n     hint: git sandbox mcp in this repository says what is wrong",
		"info store agents read: not made yet",
		"info change watchers: none running",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, got)
		}
	}
	if failed != 2 {
		t.Errorf("failed = %d, want 2:\n%s", failed, got)
	}
}

// Outside a repository, doctor says so and still checks the rest; an
// engine that does not answer is a FAIL with a hint.
func TestDoctorOutsideARepository(t *testing.T) {
	f := enginefake.New()
	f.Fail("Check", errors.New("Cannot connect to the Docker daemon"))
	newEnv(t, f)
	var out bytes.Buffer
	doc := &Doctor{Ctx: context.Background(), Out: &out,
		ProxyBinary: func(string) (proxyimage.Binary, error) { return proxyimage.Binary{}, errors.New("not static") }}
	failed := doc.Run(nil, errors.New("not a git repository"))
	got := out.String()
	for _, want := range []string{
		"FAIL repository: not a git repository\n     hint: run git sandbox doctor inside a git checkout",
		"FAIL docker: Cannot connect to the Docker daemon",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor's report lacks %q:\n%s", want, got)
		}
	}
	if failed < 2 {
		t.Errorf("failed = %d, want at least 2:\n%s", failed, got)
	}
}
