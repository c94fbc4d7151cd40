package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func setup(t *testing.T, user, repo string) (repoDir string) {
	t.Helper()
	dir := t.TempDir()
	userFile := filepath.Join(dir, "user.toml")
	if user != "" {
		if err := os.WriteFile(userFile, []byte(user), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GIT_SANDBOX_CONFIG", userFile)
	repoDir = filepath.Join(dir, "repo")
	if err := os.MkdirAll(repoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if repo != "" {
		if err := os.WriteFile(filepath.Join(repoDir, RepoFile), []byte(repo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return repoDir
}

func TestDefaultsWithoutFiles(t *testing.T) {
	l, err := Load(setup(t, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if l.Image != DefaultImage() || l.Network != "allowlist" || l.Rescue.Interval.Duration != 2*time.Minute {
		t.Errorf("defaults = %+v", l.Config)
	}
	if l.UserFile != "" || l.RepoFile != "" {
		t.Errorf("no file should be reported: %q %q", l.UserFile, l.RepoFile)
	}
}

func TestUserConfigIsTrusted(t *testing.T) {
	user := `
env = ["ANTHROPIC_API_KEY"]
network = "none"
runtime = "runsc"
[[mount]]
source = "/opt/cache"
target = "/cache"
readonly = true
[limits]
memory = "2g"
`
	l, err := Load(setup(t, user, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Mounts) != 1 || l.Mounts[0].Target != "/cache" || !l.Mounts[0].ReadOnly {
		t.Errorf("mounts = %+v", l.Mounts)
	}
	if l.Runtime != "runsc" || l.Network != "none" || l.Limits.Memory != "2g" || l.Env[0] != "ANTHROPIC_API_KEY" {
		t.Errorf("config = %+v", l.Config)
	}
}

func TestRepoConfigRefusals(t *testing.T) {
	tests := []struct {
		name, repo, key string
	}{
		{"mount", "[[mount]]\nsource = \"/home/u\"\ntarget = \"/h\"\n", "mount"},
		{"env", "env = [\"AWS_SECRET_ACCESS_KEY\"]\n", "env"},
		{"runtime", "runtime = \"runc\"\n", "runtime"},
		{"privileged", "privileged = true\n", "privileged"},
		{"cap_add", "cap_add = [\"SYS_ADMIN\"]\n", "cap_add"},
		{"worktrees_dir", "worktrees_dir = \"/\"\n", "worktrees_dir"},
		{"base_image", "base_image = \"evil/base\"\n", "base_image"},
		{"cache", "[[cache]]\ntarget = \"/home/sandbox/.npm\"\n", "cache"},
		{"secret", "[[secret]]\nname = \"GH_TOKEN\"\nhosts = [\"evil.example\"]\nfrom_env = \"GH_TOKEN\"\n", "secret"},
		{"upstream_ca", "upstream_ca = \"/tmp/evil.pem\"\n", "upstream_ca"},
		{"host", "[[host]]\nname = \"api.github.com\"\ninspect = true\n", "host"},
		{"mcp", "[mcp]\nallow_land = true\n", "mcp"},
		{"mcp tools", "[mcp]\ntools = [\"sandbox_land\"]\n", "mcp"},
		{"mcp dotted", "mcp.allow_land = true\n", "mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(setup(t, "", tt.repo))
			if err == nil {
				t.Fatal("repository config was accepted")
			}
			if !strings.Contains(err.Error(), `"`+tt.key+`"`) {
				t.Errorf("error does not name the key %q: %v", tt.key, err)
			}
		})
	}
}

// TestMCPIsTheUsers: landing through git sandbox mcp is off unless the
// user's own config turns it on, and tools narrows the tool list.
func TestMCPIsTheUsers(t *testing.T) {
	l, err := Load(setup(t, "", ""))
	if err != nil {
		t.Fatal(err)
	}
	if l.MCP.AllowLand || l.MCP.Tools != nil {
		t.Errorf("mcp defaults = %+v, want landing off and every tool", l.MCP)
	}
	l, err = Load(setup(t, "[mcp]\nallow_land = true\ntools = [\"sandbox_list\", \"sandbox_land\"]\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !l.MCP.AllowLand || strings.Join(l.MCP.Tools, ",") != "sandbox_list,sandbox_land" {
		t.Errorf("mcp = %+v", l.MCP)
	}
}

func TestRepoConfigNetworkHostIsRefused(t *testing.T) {
	_, err := Load(setup(t, "", "network = \"host\"\n"))
	if err == nil || !strings.Contains(err.Error(), "network") {
		t.Fatalf("network = host accepted or error does not name the key: %v", err)
	}
}

func TestRepoConfigMayOnlyTighten(t *testing.T) {
	user := "network = \"open\"\n[limits]\nmemory = \"4g\"\npids = 100\ncpus = 2.0\n"
	repo := "agent = \"shell\"\nverify = \"make test\"\nnetwork = \"none\"\n[limits]\nmemory = \"16g\"\npids = 50\ncpus = 4.0\n"
	l, err := Load(setup(t, user, repo))
	if err != nil {
		t.Fatal(err)
	}
	if l.Agent != "shell" || l.Verify != "make test" {
		t.Errorf("repository choices not applied: %+v", l.Config)
	}
	if l.Network != "none" {
		t.Errorf("network tightening not applied: %q", l.Network)
	}
	if l.Limits.Memory != "4g" || l.Limits.CPUs != 2 {
		t.Errorf("looser limits applied: %+v", l.Limits)
	}
	if l.Limits.Pids != 50 {
		t.Errorf("tighter pids not applied: %d", l.Limits.Pids)
	}
	if len(l.Warnings) != 2 {
		t.Errorf("want a warning per ignored limit, got %q", l.Warnings)
	}
}

func TestRepoConfigCannotLoosenNetwork(t *testing.T) {
	for _, c := range []struct{ user, repo string }{{"none", "allowlist"}, {"none", "open"}, {"allowlist", "open"}} {
		_, err := Load(setup(t, "network = \""+c.user+"\"\n", "network = \""+c.repo+"\"\n"))
		if err == nil || !strings.Contains(err.Error(), `"network"`) {
			t.Fatalf("network loosening %s -> %s accepted or key not named: %v", c.user, c.repo, err)
		}
	}
	l, err := Load(setup(t, "", "network = \"allowlist\"\n"))
	if err != nil || l.Network != "allowlist" {
		t.Fatalf("restating the user's network refused: %v", err)
	}
	l, err = Load(setup(t, "network = \"open\"\n", "network = \"none\"\n"))
	if err != nil || l.Network != "none" {
		t.Fatalf("choosing none refused: %v", err)
	}
}

func TestAllowListSources(t *testing.T) {
	l, err := Load(setup(t, "allow = [\"api.example.com\", \"*.cdn.example\"]\ndeny = [\"bad.example\"]\n", "deny = [\"api.example.com\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Allow) != 2 || len(l.Deny) != 1 || len(l.RepoDeny) != 1 || l.RepoDeny[0] != "api.example.com" {
		t.Errorf("allow %q deny %q repo deny %q", l.Allow, l.Deny, l.RepoDeny)
	}
	for _, repo := range []string{"allow = [\"evil.example\"]\n", "verify_allow = [\"evil.example\"]\n"} {
		if _, err := Load(setup(t, "", repo)); err == nil || !strings.Contains(err.Error(), "may not ask for") {
			t.Errorf("repository %q: %v", repo, err)
		}
	}
	if _, err := Load(setup(t, "allow = [\"https://x.example/\"]\n", "")); err == nil || !strings.Contains(err.Error(), "allow") {
		t.Errorf("a bad entry was accepted: %v", err)
	}
}

func TestUnknownKey(t *testing.T) {
	_, err := Load(setup(t, "agnet = \"claude\"\n", ""))
	if err == nil || !strings.Contains(err.Error(), "agnet") {
		t.Fatalf("unknown key not reported: %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"90s": 90 * time.Second, "2m": 2 * time.Minute, "14d": 14 * 24 * time.Hour, "1w": 7 * 24 * time.Hour,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1d", "-5s"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func TestNumericSettingsAreValidated(t *testing.T) {
	tests := []struct {
		user, repo string
		want       string // "" means accepted
	}{
		{user: "[limits]\ncpus = -3\n", want: "limits.cpus = -3: must be a number of CPUs from 0.01 to 1024"},
		{user: "[limits]\ncpus = 0\n", want: "limits.cpus = 0: must be"},
		{user: "[limits]\ncpus = 100000\n", want: "limits.cpus = 100000: must be"},
		{user: "[limits]\ncpus = 0.5\n"},
		{user: "[limits]\npids = 0\n", want: "limits.pids = 0: must be a number of processes from 16 to 4194304"},
		{user: "[limits]\npids = 256\n"},
		{user: "[limits]\nmemory = \"1k\"\n", want: `limits.memory = "1k": must be a size of at least 6m`},
		{user: "[limits]\nmemory = \"lots\"\n", want: `limits.memory = "lots": must be`},
		{user: "[limits]\nmemory = \"0\"\n"},
		{user: "[rescue]\ninterval = \"0s\"\n", want: `rescue.interval = "0s": must be a duration from 1s to 24h`},
		{user: "[rescue]\ninterval = \"2d\"\n", want: `rescue.interval = "48h": must be a duration from 1s to 24h`},
		{user: "[rescue]\ninterval = \"1s\"\n"},
		{repo: "[rescue]\ninterval = \"1s\"\n", want: `rescue.interval = "1s": must be a duration from 10s to 24h`},
		{repo: "[rescue]\ninterval = \"30s\"\n"},
		{repo: "[limits]\ncpus = -3\n", want: "limits.cpus = -3: must be"},
		{repo: "[limits]\npids = 0\n", want: "limits.pids = 0: must be"},
		{user: "image = \"\"\n", want: `image = "": must name an image`},
		{repo: "image = \"a b\"\n", want: `image = "a b": must name an image`},
		{user: "base_image = \"\"\n", want: `base_image = "": must name an image`},
	}
	for _, tt := range tests {
		_, err := Load(setup(t, tt.user, tt.repo))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("user %q repo %q: %v", tt.user, tt.repo, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("user %q repo %q: error %v, want %q", tt.user, tt.repo, err, tt.want)
		}
	}
}

func TestFlagValuesAreValidated(t *testing.T) {
	if err := CheckCPUs("", "--cpus", -1); err == nil || err.Error() != "--cpus -1: must be a number of CPUs from 0.01 to 1024" {
		t.Errorf("CheckCPUs: %v", err)
	}
	if err := CheckPids("", "--pids", 1); err == nil || !strings.HasPrefix(err.Error(), "--pids 1: must be") {
		t.Errorf("CheckPids: %v", err)
	}
}

func TestCaches(t *testing.T) {
	l, err := Load(setup(t, "[[cache]]\ntarget = \"/home/sandbox/go/pkg/mod\"\n[[cache]]\ntarget = \"/var/cache/x/\"\n", ""))
	if err != nil || len(l.Caches) != 2 || l.Caches[0].Target != "/home/sandbox/go/pkg/mod" {
		t.Fatalf("caches: %+v %v", l, err)
	}
	for _, bad := range []string{"relative", "/", "/home/sandbox", "/workspace", "/workspace/node_modules", "/a,b"} {
		if _, err := Load(setup(t, "[[cache]]\ntarget = \""+bad+"\"\n", "")); err == nil {
			t.Errorf("cache target %q accepted", bad)
		}
	}
	if _, err := Load(setup(t, "[[cache]]\ntarget = \"/c\"\n[[cache]]\ntarget = \"/c/\"\n", "")); err == nil {
		t.Errorf("a cache listed twice was accepted")
	}
}

func TestRepoCachesAndSetupInputs(t *testing.T) {
	l, err := Load(setup(t, "[[cache]]\ntarget = \"/var/cache/mine\"\n",
		"setup_inputs = [\"go.sum\", \"web/package-lock.json\"]\n[[repo_cache]]\nname = \"gomod\"\ntarget = \"/home/sandbox/go/pkg/mod\"\n[[repo_cache]]\nname = \"dup\"\ntarget = \"/var/cache/mine\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.RepoCaches) != 1 || l.RepoCaches[0].Name != "gomod" || len(l.SetupInputs) != 2 {
		t.Errorf("repo caches %+v, inputs %q", l.RepoCaches, l.SetupInputs)
	}
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "your own [[cache]] already keeps /var/cache/mine") {
		t.Errorf("warnings = %q", l.Warnings)
	}
	for _, bad := range []string{"relative", "/", "/home", "/home/sandbox", "/workspace", "/workspace/node_modules", "/proc/x", "/dev",
		"/home/sandbox/.claude", "/home/sandbox/.claude/projects", "/home/sandbox/.claude.json", "/home/sandbox/.codex", "/a,b"} {
		if _, err := Load(setup(t, "", "[[repo_cache]]\nname = \"c\"\ntarget = \""+bad+"\"\n")); err == nil {
			t.Errorf("repo_cache target %q accepted", bad)
		}
	}
	for _, name := range []string{"", "Upper", "-x", "a/b", strings.Repeat("a", 41)} {
		if _, err := Load(setup(t, "", "[[repo_cache]]\nname = \""+name+"\"\ntarget = \"/c\"\n")); err == nil {
			t.Errorf("repo_cache name %q accepted", name)
		}
	}
	if _, err := Load(setup(t, "", "[[repo_cache]]\nname = \"a\"\ntarget = \"/c\"\n[[repo_cache]]\nname = \"a\"\ntarget = \"/d\"\n")); err == nil {
		t.Errorf("a name listed twice was accepted")
	}
	if _, err := Load(setup(t, "[[repo_cache]]\nname = \"a\"\ntarget = \"/c\"\n", "")); err == nil || !strings.Contains(err.Error(), "repo_cache") {
		t.Errorf("repo_cache in the user's config: %v", err)
	}
	for _, bad := range []string{"/etc/passwd", "../x", "a/../b", "./a", "*.lock", "a:b", ".", ""} {
		if _, err := Load(setup(t, "", "setup_inputs = [\""+bad+"\"]\n")); err == nil {
			t.Errorf("setup input %q accepted", bad)
		}
	}
}

func TestHosts(t *testing.T) {
	l, err := Load(setup(t, "[[host]]\nname = \"api.example.com\"\ninspect = true\n[[host]]\nname = \"*.example.org:8443\"\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.InspectHosts(); len(got) != 1 || got[0] != "api.example.com" {
		t.Errorf("inspected hosts = %q, want api.example.com only", got)
	}
	for _, tt := range []struct{ name, user, want string }{
		{"address", "[[host]]\nname = \"192.0.2.7\"\ninspect = true\n", "is an address"},
		{"no name", "[[host]]\ninspect = true\n", "not a host entry"},
		{"twice", "[[host]]\nname = \"a.example\"\n[[host]]\nname = \"a.example\"\n", "twice"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(setup(t, tt.user, ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	ok := "[[secret]]\nname = \"API_KEY\"\nhosts = [\"api.example.com\", \"*.example.org:8443\"]\nfrom_env = \"MY_KEY\"\n"
	l, err := Load(setup(t, ok, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Secrets) != 1 || l.Secrets[0].Name != "API_KEY" || len(l.Secrets[0].Hosts) != 2 || l.Secrets[0].Source() != "from_env MY_KEY" {
		t.Errorf("secrets = %+v", l.Secrets)
	}
	for _, tt := range []struct{ name, user, want string }{
		{"no source", "[[secret]]\nname = \"K\"\nhosts = [\"a.example\"]\n", "exactly one of"},
		{"two sources", "[[secret]]\nname = \"K\"\nhosts = [\"a.example\"]\nfrom_env = \"K\"\nfrom_command = \"echo x\"\n", "exactly one of"},
		{"no hosts", "[[secret]]\nname = \"K\"\nfrom_env = \"K\"\n", "no hosts"},
		{"address", "[[secret]]\nname = \"K\"\nhosts = [\"192.0.2.7\"]\nfrom_env = \"K\"\n", "is an address"},
		{"bad name", "[[secret]]\nname = \"A-B\"\nhosts = [\"a.example\"]\nfrom_env = \"K\"\n", "environment variable name"},
		{"twice", "[[secret]]\nname = \"K\"\nhosts = [\"a.example\"]\nfrom_env = \"K\"\n[[secret]]\nname = \"K\"\nhosts = [\"b.example\"]\nfrom_env = \"K\"\n", "twice"},
		{"reserved", "[[secret]]\nname = \"https_proxy\"\nhosts = [\"a.example\"]\nfrom_env = \"K\"\n", "sets https_proxy"},
		{"relative file", "[[secret]]\nname = \"K\"\nhosts = [\"a.example\"]\nfrom_file = \"key.txt\"\n", "absolute"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(setup(t, tt.user, ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
