package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent on the cluster attacks what it can name: its private git
// directory (hooks, fsmonitor, hooksPath, refs of the user's branch and of
// the rescue chain), the helper's state, the cluster's credentials. None of
// it runs or lands on this machine, and the Pod has no credentials.
func testAttackKubernetesAgent(t *testing.T) {
	k := k8sEnv(t, "")
	pwned := filepath.Join(k.Root, "PWNED")
	agent := `G=/sandbox/git
for h in pre-commit post-checkout post-merge reference-transaction pre-push; do
	printf '#!/bin/sh\ntouch ` + pwned + `-$0\n' >$G/hooks/$h 2>/dev/null || { mkdir -p $G/hooks; printf '#!/bin/sh\ntouch ` + pwned + `-hook\n' >$G/hooks/$h; }
	chmod +x $G/hooks/$h
done
git config core.fsmonitor 'touch ` + pwned + `-fsmonitor; false'
git config core.hooksPath /workspace/.hooks
echo fine >work.txt && git add work.txt && git commit -qm "agent: work"
git update-ref refs/heads/main HEAD
git update-ref refs/sandbox/other/rescue HEAD
git update-ref refs/remotes/origin/main HEAD
echo "token:$(ls /var/run/secrets/kubernetes.io/serviceaccount 2>&1 | head -1)"
echo "state:$(ls /sandbox-state 2>&1 | head -1)"
echo "kubeconfig:$(ls ` + k.kubeconfig + ` 2>&1)"`
	mainBefore := k.Git("rev-parse", "main")
	r := k.MustSandbox("start", "atk", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	for _, want := range []string{"token:ls: cannot access", "state:ls: cannot access", "kubeconfig:ls: cannot access"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the agent reached what it must not (want %q):\n%s", want, r.Stdout)
		}
	}
	k.MustSandbox("diff", "atk")
	if got := k.Git("rev-parse", "main"); got != mainBefore {
		t.Errorf("the agent moved the user's main: %s -> %s", mainBefore, got)
	}
	if r := k.Run(k.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/sandbox/other/rescue"); r.Code == 0 {
		t.Errorf("the agent's ref refs/sandbox/other/rescue reached the host")
	}
	if r := k.Run(k.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/remotes/origin/main"); r.Code == 0 {
		t.Errorf("the agent's ref refs/remotes/origin/main reached the host")
	}
	k.MustSandbox("land", "atk", "-m", "agent work")
	if got := k.Git("show", "main:work.txt"); got != "fine" {
		t.Errorf("main:work.txt = %q", got)
	}
	matches, _ := filepath.Glob(pwned + "*")
	if len(matches) > 0 {
		t.Errorf("something the agent wrote ran on this machine: %q", matches)
	}
	if cfg, err := os.ReadFile(filepath.Join(k.Repo, ".git", "config")); err != nil || strings.Contains(string(cfg), "fsmonitor") || strings.Contains(string(cfg), "hooksPath") {
		t.Errorf("the user's git config took the agent's settings (%v):\n%s", err, cfg)
	}
	k.assertNothingLeft(t)
}
