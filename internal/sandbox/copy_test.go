package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/enginefake"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
)

// copyEngine gives the test env a second fake engine "far" in copy mode.
// The fake's execs do nothing (no helper really runs), so a start gets as
// far as its baseline, which then fails: a failing helper.
func copyEngine(te *testEnv) *enginefake.Engine {
	far := enginefake.New(config.DefaultImage())
	far.OnExec = func(_ enginefake.Container, o container.ExecOptions) int {
		if o.Streams.Stdin != nil {
			_, _ = io.Copy(io.Discard, o.Streams.Stdin)
		}
		return 0
	}
	te.env.Config.Engines = []config.Engine{{Name: "far", Host: "tcp://far.example:2376", Mode: config.EngineModeCopy}}
	te.env.connectNamed = func(_ context.Context, name string) (Engine, error) {
		if name == "far" {
			return far, nil
		}
		return te.fake, nil
	}
	return far
}

func TestCopyModePlanMountsVolumesOnly(t *testing.T) {
	te := newTestEnv(t)
	copyEngine(te)
	o := detached("c")
	o.Engine, o.DryRun = "far", true
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plan
	if p.Copy == nil || p.Engine != "far" || p.Worktree != "" {
		t.Fatalf("plan: engine %q copy %+v worktree %q", p.Engine, p.Copy, p.Worktree)
	}
	for _, m := range p.Container.Mounts {
		if !m.Volume {
			t.Errorf("copy mode mounts host path %s at %s", m.Source, m.Target)
		}
	}
	if len(p.Container.Mounts) < 3 {
		t.Errorf("mounts: %+v", p.Container.Mounts)
	}
}

// In allowlist mode the proxy mounts volumes too: its binary and
// configuration are loaded into one at its start.
func TestCopyModeProxyMountsVolumesOnly(t *testing.T) {
	te := newTestEnv(t)
	copyEngine(te)
	o := detached("c")
	o.Engine, o.DryRun, o.Network = "far", true, "allowlist"
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	eg := res.Plan.Egress
	if eg == nil || eg.Proxy == nil {
		t.Fatalf("no proxy planned: %+v", res.Plan)
	}
	for _, m := range eg.Proxy.Mounts {
		if !m.Volume {
			t.Errorf("the proxy mounts host path %s at %s", m.Source, m.Target)
		}
	}
	if len(eg.Proxy.Mounts) != 3 {
		t.Errorf("proxy mounts: %+v", eg.Proxy.Mounts)
	}
}

func TestCopyModeRefusesWhatNeedsTheHostsFiles(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(secretFile, []byte("the-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*StartOptions, *config.Loaded)
		want string
	}{
		{"carry", func(o *StartOptions, _ *config.Loaded) { o.Carry = true }, "--carry"},
		{"publish", func(o *StartOptions, _ *config.Loaded) { o.Network = "open"; o.Publish = []string{"3000"} }, "--publish"},
		{"mounts", func(_ *StartOptions, c *config.Loaded) { c.Mounts = []config.Mount{{Source: "/etc", Target: "/x"}} }, "[[mount]]"},
		{"secrets", func(o *StartOptions, c *config.Loaded) {
			o.Network = "allowlist"
			c.Secrets = []config.Secret{{Name: "API_KEY", Hosts: []string{"api.example.com"}, FromFile: secretFile}}
		}, "cannot take your [[secret]] entries"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			te := newTestEnv(t)
			far := copyEngine(te)
			o := detached("c")
			o.Engine = "far"
			tc.mod(&o, te.env.Config)
			_, err := te.env.Start(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start = %v, want a refusal naming %s", err, tc.want)
			}
			te.assertNothingLeft("c", false)
			if len(far.Containers()) > 0 {
				t.Errorf("containers made on the engine: %d", len(far.Containers()))
			}
		})
	}
}

// A copy-mode start that fails at any step leaves nothing: not on this
// machine (branch, refs, state) and not on the engine (containers,
// volumes).
func TestCopyModeStartRollsBack(t *testing.T) {
	for _, step := range []string{"volumes", "checkout", "baseline (the helper hands back no tree)"} {
		t.Run(step, func(t *testing.T) {
			te := newTestEnv(t)
			far := copyEngine(te)
			boom := errors.New("injected")
			switch step {
			case "volumes", "checkout":
				te.env.failStep = func(s string) error {
					if s == step {
						return boom
					}
					return nil
				}
			}
			o := detached("c")
			o.Engine = "far"
			if _, err := te.env.Start(context.Background(), o); err == nil {
				t.Fatal("start succeeded")
			}
			te.assertNothingLeft("c", false)
			if cs := far.Containers(); len(cs) > 0 {
				t.Errorf("containers left on the engine: %d", len(cs))
			}
			if vs, _ := far.ListVolumes(context.Background()); len(vs) > 0 {
				t.Errorf("volumes left on the engine: %+v", vs)
			}
		})
	}
}

func TestParseAdded(t *testing.T) {
	large, errs := parseAdded("5000\tbig.bin\x0012\tdir/a b\x00oops\x00\x00error: unable to add '.GIT/x'\n")
	if len(large) != 2 || large[0].Path != "big.bin" || large[0].Size != 5000 || large[1].Path != "dir/a b" {
		t.Errorf("large = %+v", large)
	}
	if errs != "error: unable to add '.GIT/x'\n" {
		t.Errorf("add errors = %q", errs)
	}
	if large, errs := parseAdded("\x00"); len(large) != 0 || errs != "" {
		t.Errorf("empty: %+v %q", large, errs)
	}
	// A path git would take for .git is not believed.
	if large, _ := parseAdded("9\t.git/x\x00\x00"); len(large) != 0 {
		t.Errorf("took %+v", large)
	}
}

// A copy-mode sandbox's land cannot run your commit hooks (their run needs
// this machine's files): it refuses, naming --no-verify, and starts nothing.
func TestCopyModeCommitHooksRefuse(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("h")
	sb.Copy = &record.Copy{Workspace: "ws"}
	before := len(te.fake.Calls())
	_, err := sb.runCommitHooks(context.Background(), &land.Plan{}, t.TempDir(), []string{"pre-commit"}, IO{})
	ue, ok := usererr.As(err)
	if !ok || !strings.Contains(err.Error(), "pre-commit hook(s) cannot run") || !strings.Contains(strings.Join(ue.Hints, " "), "--no-verify") || ue.Code != usererr.ExitRefused {
		t.Fatalf("hooks in copy mode = %#v", err)
	}
	if got := len(te.fake.Calls()); got != before {
		t.Errorf("the refusal called the engine %d times", got-before)
	}
}
