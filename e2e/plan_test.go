package e2e

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestDryRunJSONGolden pins the full plan: mounts, labels, argv, limits and
// hardening. Paths and ids that differ per run are replaced by names.
func TestDryRunJSONGolden(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteConfig("base_image = %q\nnetwork = \"none\"\n[rescue]\ninterval = \"30s\"\n[limits]\nmemory = \"2g\"\ncpus = 1.5\npids = 300\n", baseImage)
	before := e.HostState()
	r := e.MustSandbox("start", "fix/login", "--dry-run", "--json", "--agent", "claude", "-p", "fix the login redirect",
		"--verify", "make test", "-e", "FOO=bar", "--memory", "1g")
	e.AssertSameHostState(before)
	if _, err := os.Stat(e.State); err == nil {
		t.Errorf("--dry-run created the state directory %s", e.State)
	}
	if b := e.Git("branch", "--list", "fix/login"); b != "" {
		t.Errorf("--dry-run created the branch")
	}
	var v any
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil {
		t.Fatalf("--dry-run --json is not JSON: %v\n%s", err, r.Stdout)
	}
	got := normalize(e, r.Stdout)
	golden := filepath.Join("testdata", "dryrun.json")
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	must(t, err)
	if got != string(want) {
		t.Errorf("--dry-run --json differs from %s (run go test ./e2e -run DryRun -update to accept):\n%s", golden, got)
	}
}

func normalize(e *Env, s string) string {
	root, _ := filepath.EvalSymlinks(e.Root)
	repl := strings.NewReplacer(
		root, "$ROOT",
		e.Root, "$ROOT",
		e.RepoID(), "$REPO_ID",
		e.Git("rev-parse", "main"), "$BASE_COMMIT",
		`"user": "`+strconv.Itoa(os.Getuid())+":"+strconv.Itoa(os.Getgid())+`"`, `"user": "$UID:$GID"`,
	)
	return containerHash.ReplaceAllString(repl.Replace(s), "$1-$$HASH")
}

// containerHash is the per-repository suffix of container names.
var containerHash = regexp.MustCompile(`(git-sandbox-[A-Za-z0-9_.-]+)-[0-9a-f]{8}\b`)

func TestDryRunText(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	r := e.MustSandbox("start", "t1", "--dry-run", "--agent", "shell", "-e", "SECRET=hunter2", "--", "make", "test")
	for _, want := range []string{"container git-sandbox-repo-t1-", "cap-drop=[ALL]", "no-new-privileges", `["make" "test"]`, "ro " + filepath.Join(e.Repo, ".git", "objects"), "SECRET=…"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("dry-run text lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "hunter2") {
		t.Errorf("dry-run printed a passed-through secret:\n%s", r.Stdout)
	}
}

// TestContainerHardening checks docker inspect of a real sandbox.
func TestContainerHardening(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "hard", "-d", "--agent", "shell", "--network", "none", "--", "sleep", "60")
	p := e.PsOf("hard")
	doc := Inspect(t, p.Container)
	hc := doc["HostConfig"].(map[string]any)
	cfg := doc["Config"].(map[string]any)
	if capDrop, _ := hc["CapDrop"].([]any); len(capDrop) != 1 || capDrop[0] != "ALL" {
		t.Errorf("CapDrop = %v", hc["CapDrop"])
	}
	if capAdd, _ := hc["CapAdd"].([]any); len(capAdd) != 0 {
		t.Errorf("CapAdd = %v", capAdd)
	}
	if so, _ := hc["SecurityOpt"].([]any); len(so) == 0 || !strings.HasPrefix(so[0].(string), "no-new-privileges") {
		t.Errorf("SecurityOpt = %v", hc["SecurityOpt"])
	}
	if hc["Privileged"] != false {
		t.Errorf("Privileged = %v", hc["Privileged"])
	}
	if pids, _ := hc["PidsLimit"].(float64); pids != 256 {
		t.Errorf("PidsLimit = %v", hc["PidsLimit"])
	}
	if mem, _ := hc["Memory"].(float64); mem != 1<<30 {
		t.Errorf("Memory = %v", hc["Memory"])
	}
	if cpus, _ := hc["NanoCpus"].(float64); cpus <= 0 {
		t.Errorf("NanoCpus = %v", hc["NanoCpus"])
	}
	for key, bad := range map[string]string{"NetworkMode": "host", "PidMode": "host", "IpcMode": "host", "UTSMode": "host", "UsernsMode": "host"} {
		if hc[key] == bad {
			t.Errorf("%s = %v", key, hc[key])
		}
	}
	if hc["NetworkMode"] != "none" {
		t.Errorf("NetworkMode = %v, want none", hc["NetworkMode"])
	}
	if want := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()); cfg["User"] != want {
		t.Errorf("User = %v, want %s", cfg["User"], want)
	}
	mounts, _ := doc["Mounts"].([]any)
	for _, m := range mounts {
		mm := m.(map[string]any)
		src, _ := mm["Source"].(string)
		if strings.Contains(src, "docker.sock") || src == "/" || src == e.Home {
			t.Errorf("forbidden mount %v", mm)
		}
		dst, _ := mm["Destination"].(string)
		rw, _ := mm["RW"].(bool)
		if (dst == "/workspace/.git" || strings.HasSuffix(dst, "/.git/objects") || strings.HasSuffix(dst, "/.git/hooks")) && rw {
			t.Errorf("%s is mounted read-write", dst)
		}
	}
	labels := cfg["Labels"].(map[string]any)
	for _, k := range []string{"git-sandbox.repo", "git-sandbox.branch", "git-sandbox.base", "git-sandbox.baseline", "git-sandbox.agent", "git-sandbox.worktree"} {
		if labels[k] == nil || labels[k] == "" {
			t.Errorf("label %s missing: %v", k, labels)
		}
	}
	if labels["git-sandbox.branch"] != "hard" || labels["git-sandbox.repo"] != e.RepoID() {
		t.Errorf("labels = %v", labels)
	}
	// Running as that uid, the agent has no capabilities at all.
	x := e.Sandbox("exec", "hard", "--", "sh", "-c", "grep CapEff /proc/self/status; test -S /var/run/docker.sock && echo SOCKET")
	if !strings.Contains(x.Stdout, "0000000000000000") || strings.Contains(x.Stdout, "SOCKET") {
		t.Errorf("capabilities or Docker socket inside the sandbox: %s", x)
	}
}
