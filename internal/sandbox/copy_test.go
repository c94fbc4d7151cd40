package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
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
	te.env.Engines = ConnectorFunc(func(_ context.Context, name string) (Engine, error) {
		if name == "far" {
			return far, nil
		}
		return te.fake, nil
	})
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

// In allowlist mode the proxy mounts volumes too: its configuration is
// loaded into one at its start (the binary is its image).
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
	if len(eg.Proxy.Mounts) != 2 {
		t.Errorf("proxy mounts: %+v", eg.Proxy.Mounts)
	}
	if eg.Proxy.Image != testProxyBinary.Tag() || !eg.Proxy.ToolImage || eg.Proxy.Image == res.Plan.Container.Image {
		t.Errorf("the copy-mode proxy runs %q (tool image %v), want %s", eg.Proxy.Image, eg.Proxy.ToolImage, testProxyBinary.Tag())
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
		{"publish through the proxy", func(o *StartOptions, _ *config.Loaded) { o.Network = "allowlist"; o.Publish = []string{"3000"} }, "--publish"},
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
	t.Run("no helper round trip for the baseline", func(t *testing.T) {
		te := newTestEnv(t)
		copyEngine(te)
		o := detached("c")
		o.Engine = "far"
		sb, err := te.env.Start(context.Background(), o)
		if err != nil {
			t.Fatalf("a start whose helper hands back nothing failed: %v", err)
		}
		if got, want := te.git("rev-parse", sb.Sandbox.Baseline+"^{tree}"), te.git("rev-parse", "main^{tree}"); got != want {
			t.Errorf("the baseline's tree is %s, want the start commit's %s", got, want)
		}
	})
	for _, step := range []string{"worktree", "baseline", "record", "network", "container", "baseline (the helper hands back no tree)"} {
		t.Run(step, func(t *testing.T) {
			te := newTestEnv(t)
			far := copyEngine(te)
			boom := errors.New("injected")
			switch step {
			case "worktree", "baseline", "record", "network", "container":
				te.env.Faults = failAt{step, boom}
			default:
				// A gitlink in the start commit: the helper takes the
				// baseline (else it is the start commit's tree).
				withGitlink(te)
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

// withGitlink commits a gitlink (a submodule's commit) to main.
func withGitlink(te *testEnv) {
	te.git("update-index", "--add", "--cacheinfo", "160000,"+te.git("rev-parse", "HEAD")+",lib")
	te.git("commit", "-q", "-m", "a submodule")
}

// A copy-mode baseline is the start commit's tree, read from nowhere: the
// helper (which here hands back nothing) is not asked for it.
func TestCopyModeBaselineIsTheStartTree(t *testing.T) {
	te := newTestEnv(t)
	far := copyEngine(te)
	helper := far.OnExec
	var scripts []string
	far.OnExec = func(c enginefake.Container, o container.ExecOptions) int {
		scripts = append(scripts, strings.Join(o.Argv, " "))
		return helper(c, o)
	}
	o := detached("c")
	o.Engine = "far"
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sb := res.Sandbox
	if got, want := te.git("rev-parse", sb.Baseline+"^{tree}"), te.git("rev-parse", sb.Start+"^{tree}"); got != want {
		t.Errorf("baseline tree %s, want the start commit's %s", got, want)
	}
	if len(scripts) == 0 {
		t.Fatal("the helper ran nothing: the start commit was not shipped")
	}
	for _, s := range scripts {
		if strings.Contains(s, "pack-objects --revs") {
			t.Errorf("the baseline asked the helper for a snapshot: %.80s", s)
		}
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

// agentPack makes, in a repository of the test's own (the agent's side), a
// commit on start holding a file of size random bytes, and returns its id
// and the pack the helper would send (pack-objects --revs from start).
func agentPack(t *testing.T, start string, te *testEnv, size int) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	run := func(stdin io.Reader, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.com", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.com")
		cmd.Stdin = stdin
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	run(nil, "clone", "-q", "--no-local", te.repo, ".")
	data := make([]byte, size)
	_, _ = rand.Read(data)
	must(t, os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644))
	run(nil, "add", "big.bin")
	run(nil, "commit", "-q", "-m", "big")
	head := run(nil, "rev-parse", "HEAD")
	cmd := exec.Command("git", "pack-objects", "--revs", "--stdout", "-q")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	cmd.Stdin = strings.NewReader(head + "\n--not\n" + start + "\n")
	pack, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return head, pack
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCopySyncCutsAPackOverBudget: the pack of the agent's commits the
// helper streams back is cut as soon as it passes budget.sync, not written
// whole into the sandbox's state first; the refusal names the setting,
// and nothing is left: no objects in the user's store, no ref, no
// temporary directory.
func TestCopySyncCutsAPackOverBudget(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("cs")
	sb.Copy = &record.Copy{Helper: sb.Container}
	te.env.Config.Budget.Sync = "1m"
	head, pack := agentPack(t, sb.Start, te, 8<<20)
	var sent atomic.Int64
	te.fake.OnExec = func(_ enginefake.Container, o container.ExecOptions) int {
		// The helper's scripts (internal/workspace), told apart by what
		// they run.
		switch script := o.Argv[2]; {
		case strings.Contains(script, `"$G/HEAD"`):
			_, _ = io.WriteString(o.Streams.Stdout, head+" refs/heads/cs\n")
		case strings.Contains(script, "pack-objects --revs"):
			// As the engine's stream would: in pieces, stopping when the
			// host stops reading.
			for off := 0; off < len(pack); off += 32 << 10 {
				n, err := o.Streams.Stdout.Write(pack[off:min(off+32<<10, len(pack))])
				sent.Add(int64(n))
				if err != nil {
					return 0
				}
			}
		}
		return 0
	}
	_, err := sb.Sync(context.Background(), false)
	ue, ok := usererr.As(err)
	if !ok || ue.Code != usererr.ExitRefused || !strings.Contains(err.Error(), "over the budget of one sync (budget.sync)") ||
		!strings.Contains(strings.Join(ue.Hints, " "), "raise budget.sync") {
		t.Fatalf("sync of an 8 MiB pack within 1m = %#v", err)
	}
	if n := sent.Load(); n > 2<<20 {
		t.Errorf("the host read %d bytes of the %d-byte pack, want the stream cut near the budget", n, len(pack))
	}
	if _, err := te.gitErr("cat-file", "-e", head); err == nil {
		t.Error("the refused commit is in the user's store")
	}
	if te.refExists("refs/sandbox/cs/agent") {
		t.Error("refs/sandbox/cs/agent was set")
	}
	if left, _ := filepath.Glob(filepath.Join(te.env.Layout.Dir("cs"), "sync-*")); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}

	// Within the budget the same pack comes back.
	te.env.Config.Budget.Sync = "20m"
	sent.Store(0)
	res, err := sb.Sync(context.Background(), false)
	if err != nil || res.Head != head {
		t.Fatalf("sync within budget: %+v, %v", res, err)
	}
	if _, err := te.gitErr("cat-file", "-e", head); err != nil {
		t.Error("the commit synced within budget is not in the user's store")
	}
}
