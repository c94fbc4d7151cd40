package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestNotify: the user's notify command runs once per event, with the
// sandbox, the event and the exit code in its environment: every sandbox
// gets exactly one exited line and one verdict line, a denied connection
// and a forecast conflict with the base are announced, and a second
// supervisor of the same exit announces nothing again.
func TestNotify(t *testing.T) {
	e := NewEnv(t)
	log := filepath.Join(e.Root, "notify.log")
	e.WriteConfig("base_image = %q\nnotify = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n",
		baseImage, `echo "$SANDBOX $EVENT $EXIT_CODE" >> `+log)
	e.MustSandbox("start", "pass", "-d", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", "echo ok > ok.txt")
	e.MustSandbox("start", "fail", "-d", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", "echo no > no.txt; exit 3")
	// The proxy refuses a host outside the allow list.
	e.MustSandbox("start", "denied", "-d", "--verify", "true", "--agent", "shell", "--", "bash", "-c",
		`p=${http_proxy#http://}; exec 3<>/dev/tcp/${p%:*}/${p##*:}; printf 'GET http://api.denied.test/ HTTP/1.1\r\nHost: api.denied.test\r\nConnection: close\r\n\r\n' >&3; timeout 10 cat <&3 >/dev/null; echo tried > tried.txt`)
	// The base moves under a sandbox that changes the same line, before
	// its agent exits.
	e.MustSandbox("start", "clash", "-d", "--verify", "true", "--agent", "shell", "--", "sh", "-c",
		`while [ ! -f go ]; do sleep 0.2; done; echo clash > README.md`)
	e.WriteFile("README.md", "base moved\n")
	e.Git("commit", "-q", "-am", "base moves")
	must(t, os.WriteFile(filepath.Join(e.Worktree("clash"), "go"), nil, 0o644))

	want := []string{
		"clash exited 0", "clash land-conflict", "clash verify-passed 0",
		"denied egress-denied", "denied exited 0", "denied verify-passed 0",
		"fail exited 3", "fail verify-failed 1",
		"pass exited 0", "pass verify-passed 0",
	}
	lines := func() []string {
		b, _ := os.ReadFile(log)
		l := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := range l {
			l[i] = strings.TrimSpace(l[i])
		}
		sort.Strings(l)
		return l
	}
	Eventually(t, 3*time.Minute, "every event announced", func() bool { return len(lines()) >= len(want) })
	// A second supervisor of an exit already seen (a resumed sandbox's
	// waits for the first, then finds the container exited) stays quiet.
	r := e.Sandbox("__supervise", "--interval", "1s", "--", "pass")
	if r.Code != 0 {
		t.Errorf("second supervisor: %s", r)
	}
	e.MustSandbox("wait", "pass")
	got := lines()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("notify log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWaitAny returns with the first sandbox whose agent exits.
func TestWaitAny(t *testing.T) {
	e := NewEnv(t)
	e.MustSandbox("start", "slow", "-d", "--agent", "shell", "--", "sleep", "600")
	e.MustSandbox("start", "quick", "-d", "--agent", "shell", "--", "sh", "-c", "sleep 2; exit 5")
	r := e.Sandbox("wait", "--any", "slow", "quick")
	if r.Code != 5 || strings.TrimSpace(r.Stdout) != "quick" {
		t.Errorf("wait --any: want quick with exit 5, got %s", r)
	}
	if p := e.PsOf("slow"); p.State != "running" {
		t.Errorf("slow is %s after wait --any, want running", p.State)
	}
	r = e.Sandbox("wait", "--any", "--timeout", "1s", "slow")
	if r.Code != 124 {
		t.Errorf("wait --any --timeout on a running agent: want 124, got %s", r)
	}
	// One that exited already answers at once.
	r = e.Sandbox("wait", "--any", "slow", "quick")
	if r.Code != 5 || strings.TrimSpace(r.Stdout) != "quick" {
		t.Errorf("wait --any with an exited sandbox: %s", r)
	}
}
