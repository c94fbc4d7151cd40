package e2e

// Adversarial round two: settings a sandbox was started with, history
// smuggled through sync, and host memory and disk spent on what an agent
// hands back (sync of huge objects, verify's export of huge files).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// atkProbe prints the limits and network of the container it runs in, on
// cgroup v2 or v1.
const atkProbe = `pids=$(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max)
mem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
net=$(ls /sys/class/net | tr '\n' ,)
echo "PROBE pids=$pids mem=$mem net=$net"`

// probeOf returns the fields of the first PROBE line of out.
func probeOf(t *testing.T, out string) map[string]string {
	t.Helper()
	var line string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "PROBE "); ok && !strings.Contains(s, "$") {
			line = s
			break
		}
	}
	if line == "" {
		t.Fatalf("no PROBE line in:\n%s", out)
	}
	m := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// 2. Verify ran with the current config, not the sandbox's own settings: a
// sandbox started with --network none --pids 64 was verified with the
// network and pids 4096.
func TestAttackVerifyKeepsTheSandboxSettings(t *testing.T) {
	t.Parallel()
	e, _, _ := atkEnv(t)
	e.WriteConfig("base_image = %q\nnetwork = \"bridge\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 4096\n", baseImage)
	// Armed: the probe sees the config's network and limits in a sandbox
	// started without flags.
	open := probeOf(t, e.atkStart("open", atkProbe+"\necho AGENT-DONE").Stdout)
	if open["pids"] != "4096" || !strings.Contains(open["net"], "eth") {
		t.Fatalf("the probe does not see the config's settings: %v", open)
	}
	r := e.Sandbox("start", "strict", "--agent", "shell", "--network", "none", "--pids", "64", "--memory", "512m",
		"--verify", atkProbe, "--", "sh", "-c", atkProbe+"\necho AGENT-DONE")
	if r.Code != 0 {
		t.Fatalf("start: %s", r)
	}
	agent := probeOf(t, r.Stdout)
	if agent["pids"] != "64" || agent["net"] != "lo," || agent["mem"] != "536870912" {
		t.Fatalf("the agent's own container does not have its flags: %v", agent)
	}
	verifyProbe := func(what string) map[string]string {
		t.Helper()
		// A new file, so verify runs on a tree it has no verdict for.
		must(t, os.WriteFile(filepath.Join(e.Worktree("strict"), what+".txt"), []byte(what+"\n"), 0o644))
		v := e.Sandbox("verify", "strict")
		if v.Code != 0 {
			t.Fatalf("verify (%s): %s", what, v)
		}
		return probeOf(t, v.Stderr)
	}
	// The config is looser than the flags the sandbox started with.
	if got := verifyProbe("looser"); got["pids"] != "64" || got["net"] != "lo," || got["mem"] != "536870912" {
		t.Errorf("verify ran with the config's looser settings, not the sandbox's (pids 64, no network, 512m): %v", got)
	}
	// The config, tightened after start, is stricter than the record.
	e.WriteConfig("base_image = %q\nnetwork = \"bridge\"\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"256m\"\npids = 32\n", baseImage)
	if got := verifyProbe("tighter"); got["pids"] != "32" || got["net"] != "lo," || got["mem"] != "268435456" {
		t.Errorf("verify did not take the tightened config (pids 32, no network, 256m): %v", got)
	}
}
