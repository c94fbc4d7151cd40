package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The plan start --dry-run prints (text and JSON, redaction of passed-through
// values, the golden JSON) is tested without Docker, in
// cmd/git-sandbox/testdata/script/dryrun.txt.

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
