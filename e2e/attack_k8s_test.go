package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent on the cluster attacks what it can name: its private git
// directory (hooks, fsmonitor, hooksPath, refs of the user's branch and of
// the rescue chain), the helper's state, the cluster's credentials. None of
// it runs or lands on this machine, and the Pod has no credentials.
func testAttackKubernetesAgent(t *testing.T) { attackKubernetesAgent(t, k8sEnv(t, "")) }

// attackKubernetesAgent runs the hostile agent above on k's engine (the
// cluster's runc, or gVisor). The agent also says which kernel answers
// it: under gVisor its dmesg is gVisor's own.
func attackKubernetesAgent(t *testing.T, k *k8sTest) {
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
echo "kubeconfig:$(ls ` + k.kubeconfig + ` 2>&1)"
echo "kernel:$(dmesg 2>&1 | head -n 3 | tr '\n' ' ')"`
	mainBefore := k.Git("rev-parse", "main")
	r := k.MustSandbox("start", "atk", "--engine", "k8s", "--agent", "shell", "--image", baseImage, "--network", "none", "--", "sh", "-c", agent)
	for _, want := range []string{"token:ls: cannot access", "state:ls: cannot access", "kubeconfig:ls: cannot access"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the agent reached what it must not (want %q):\n%s", want, r.Stdout)
		}
	}
	if gvisor := strings.Contains(r.Stdout, "gVisor"); gvisor != (k.runtimeClass == "gvisor") {
		t.Errorf("runtime class %q, but the agent's kernel says:\n%s", k.runtimeClass, r.Stdout)
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

// A repository's image choice on the cluster: .sandbox.toml's image, a
// devcontainer's image and its Dockerfile's FROM of a local image holding
// a key go through the user's allowed_images before anything is made on
// the cluster, as on Docker. The engine here has no image of its own, so
// its Pods run what the sandbox names: allowed (and loaded into the
// cluster), .sandbox.toml's image hands the agent the key, so the refusal
// is what kept it out; an allowed devcontainer is still refused, since the
// engine builds no images.
func testAttackKubernetesRepositoryImage(t *testing.T) {
	k := k8sEnv(t, "")
	secret := atkBakedImage(t, "k8s")
	engine := fmt.Sprintf("[[engine]]\nname = \"k8s\"\nkind = \"kubernetes\"\nkubeconfig = %q\nnamespace = %q\nruntime_class = \"runc\"\nvolume_size = \"1Gi\"\n", k.kubeconfig, k.ns)
	config := func(extra string) {
		k.WriteConfig("base_image = %q\nnetwork = \"none\"\n%s\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n\n%s", baseImage, extra, engine)
	}
	config("")
	cases := []struct {
		name  string
		files map[string]string
		where string
	}{
		{"toml", map[string]string{".sandbox.toml": fmt.Sprintf("image = %q\n", secret)}, ".sandbox.toml line 1 (image)"},
		{"dev-image", map[string]string{".devcontainer.json": fmt.Sprintf("{\"image\": %q}\n", secret)}, ".devcontainer.json line 1 (image)"},
		{"dev-from", map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile":        "FROM " + baseImage + " AS b\nFROM b\nCOPY --from=" + secret + " /etc/baked-secret /etc/baked-secret\n",
		}, ".devcontainer/Dockerfile line 3 (COPY --from)"},
	}
	use := func(files map[string]string) {
		for _, p := range []string{".sandbox.toml", ".devcontainer.json", ".devcontainer"} {
			_ = os.RemoveAll(filepath.Join(k.Repo, p))
		}
		for f, body := range files {
			k.WriteFile(f, body)
		}
		k.Git("add", "-A")
		k.Git("commit", "-q", "--allow-empty", "-m", "a hostile repository's image")
	}
	for _, c := range cases {
		use(c.files)
		r := k.Sandbox("start", c.name, "--engine", "k8s", "--agent", "shell", "--", "sh", "-c", atkBakedAgent)
		if r.Code == 0 || strings.Contains(r.Stdout, "SECRET") {
			t.Errorf("ATTACK SUCCEEDED (%s): the repository's image ran on the cluster without the user's allowance: %s", c.name, r)
		}
		if !strings.Contains(r.Stderr, secret+" from "+c.where) || !strings.Contains(r.Stderr, "allowed_images") || strings.Contains(r.Stderr, "cannot build") {
			t.Errorf("%s: the refusal does not name the image, where it comes from and the setting: %s", c.name, r)
		}
		if r := k.Run(k.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/heads/"+c.name); r.Code == 0 {
			t.Errorf("%s: the branch was created", c.name)
		}
		k.assertNothingLeft(t)
	}

	// Allowed, the image the repository names runs on the cluster, key and
	// all; a devcontainer is then refused by the engine, which builds none.
	k.c.LoadImage(t, secret)
	t.Cleanup(func() { k.c.RemoveImage(t, secret) })
	config(fmt.Sprintf("allowed_images = [%q]", secret))
	use(cases[0].files)
	r := k.Sandbox("start", "armed", "--engine", "k8s", "--agent", "shell", "--", "sh", "-c", atkBakedAgent)
	atkArmed(t, r.Stdout+r.Stderr, "SECRET")
	k.MustSandbox("rm", "--force", "armed")
	use(cases[1].files)
	if r := k.Sandbox("start", "armed-dev", "--engine", "k8s", "--agent", "shell", "--", "true"); r.Code == 0 || !strings.Contains(r.Stderr, "cannot build the image .devcontainer.json describes") {
		t.Errorf("an allowed devcontainer on the cluster: %s", r)
	}
	k.assertNothingLeft(t)
}
