package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
)

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestHomesHoldLoginsOnly: each sandbox has a home of its own; only the
// adapter's login paths go from one to the next (per agent, or per
// repository with agent_home = "per-repo").
func TestHomesHoldLoginsOnly(t *testing.T) {
	te := newTestEnv(t)
	te.fake.AddImage(te.env.Config.Image, "codex")
	ctx := context.Background()
	start := func(branch string) *Sandbox {
		t.Helper()
		o := detached(branch)
		o.Agent, o.Args, o.Prompt = "codex", nil, "fix it"
		res, err := te.env.Start(ctx, o)
		if err != nil {
			t.Fatalf("start %s: %v", branch, err)
		}
		return res.Sandbox
	}
	// A login the agent had in its old shared home is taken once.
	writeFile(t, filepath.Join(te.env.Layout.AgentHome("codex"), ".codex", "auth.json"), "old login")
	writeFile(t, filepath.Join(te.env.Layout.AgentHome("codex"), ".bashrc"), "old bashrc")
	s1 := start("t1")
	h1 := te.env.Layout.Home("t1")
	if b, err := os.ReadFile(filepath.Join(h1, ".codex", "auth.json")); err != nil || string(b) != "old login" {
		t.Errorf("login in the first sandbox: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(h1, ".bashrc")); err == nil {
		t.Errorf("the old home's .bashrc reached a sandbox")
	}
	// The agent logs in again and plants configuration.
	writeFile(t, filepath.Join(h1, ".codex", "auth.json"), "new login")
	writeFile(t, filepath.Join(h1, ".gitconfig"), "[core]\n\tfsmonitor = evil\n")
	writeFile(t, filepath.Join(h1, ".codex", "config.toml"), "evil")
	if err := te.env.network().SaveLogin(s1.Record); err != nil {
		t.Fatal(err)
	}
	start("t2")
	h2 := te.env.Layout.Home("t2")
	if b, err := os.ReadFile(filepath.Join(h2, ".codex", "auth.json")); err != nil || string(b) != "new login" {
		t.Errorf("login in the next sandbox: %q %v", b, err)
	}
	for _, p := range []string{".gitconfig", ".codex/config.toml", ".bashrc"} {
		if _, err := os.Stat(filepath.Join(h2, p)); err == nil {
			t.Errorf("%s reached the next sandbox", p)
		}
	}
	te.env.Config.AgentHome = config.AgentHomePerRepo
	s3 := start("t3")
	if _, err := os.Stat(filepath.Join(te.env.Layout.Home("t3"), ".codex", "auth.json")); err == nil {
		t.Errorf("per-repo: the shared login reached the sandbox")
	}
	if !strings.Contains(s3.LoginStore, "@"+te.env.Repo.ID) {
		t.Errorf("per-repo store = %q", s3.LoginStore)
	}
}

// TestSetupNeverSeesTheLogin: the login is in the home when the agent
// starts, and absent while setup runs, for a new sandbox and for a
// follow-up's new container (whose setup has a start of its own).
func TestSetupNeverSeesTheLogin(t *testing.T) {
	te := newTestEnv(t)
	te.fake.AddImage(te.env.Config.Image, "codex")
	te.env.Config.Setup = "make deps"
	writeFile(t, filepath.Join(te.env.Layout.Logins("codex", ""), ".codex", "auth.json"), "login")
	login := filepath.Join(te.env.Layout.Home("t1"), ".codex", "auth.json")
	var seen []string
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		_, err := os.Stat(login)
		setup := c.Starts == 1
		seen = append(seen, fmt.Sprintf("setup=%v login=%v", setup, err == nil))
		return 0, setup
	}
	o := detached("t1")
	o.Agent, o.Args, o.Prompt = "codex", nil, "fix it"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if _, err := te.find("t1").Stop(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	o = detached("t1")
	o.Args, o.Prompt = nil, "and the tests"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	want := []string{"setup=true login=false", "setup=false login=true", "setup=true login=false", "setup=false login=true"}
	if !slices.Equal(seen, want) {
		t.Errorf("starts = %q, want %q", seen, want)
	}
}
