package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAgentCLICheckedBeforeCreate: the test image was built without agent
// CLIs and says so in its label; start --agent claude on it refuses before
// any branch, worktree or container exists, with a hint, and doctor lists
// per agent whether the image has its CLI.
func TestAgentCLICheckedBeforeCreate(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	labels, err := exec.Command("docker", "image", "inspect", "--format", `{{index .Config.Labels "git-sandbox.agents"}}|{{index .Config.Labels "git-sandbox.image"}}`, testImage).Output()
	if err != nil || strings.TrimSpace(string(labels)) != "|1" {
		t.Fatalf("the test image's labels: %q %v, want an empty agent list", labels, err)
	}
	r := e.Sandbox("start", "nocli", "--agent", "claude", "-p", "fix it", "-d")
	if r.Code == 0 || !strings.Contains(r.Stderr, "has no claude CLI") || !strings.Contains(r.Stderr, "hint: rebuild it with network access") ||
		!strings.Contains(r.Stderr, "--agent (shell)") {
		t.Fatalf("start --agent claude on an image without it: %s", r)
	}
	if out := e.Run(e.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/heads/nocli"); out.Code == 0 {
		t.Errorf("the branch was created: %s", out)
	}
	_ = filepath.WalkDir(e.State, func(p string, _ fs.DirEntry, _ error) error {
		if strings.Contains(p, "nocli") {
			t.Errorf("%s was created", p)
		}
		return nil
	})
	if wl := e.Git("worktree", "list", "--porcelain"); strings.Contains(wl, "nocli") {
		t.Errorf("a linked worktree was registered:\n%s", wl)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("containers were created: %s", out)
	}
	if e.hasSandbox("nocli") {
		t.Errorf("ps lists the refused sandbox")
	}

	d := e.Sandbox("doctor")
	for _, want := range []string{"warn claude CLI: not in " + testImage + " (start --agent claude refuses, the default agent)", "warn codex CLI: not in " + testImage} {
		if !strings.Contains(d.Stdout, want) {
			t.Errorf("doctor lacks %q:\n%s", want, d)
		}
	}
}

// devTag returns the devcontainer image start said it built, and removes
// it (after the test's containers) when the test ends.
func devTag(t *testing.T, e *Env, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "building image ")
	if !ok {
		t.Fatalf("start built no image:\n%s", stderr)
	}
	tag := strings.Fields(rest)[0]
	if !strings.HasPrefix(tag, "git-sandbox-dev:repo-") {
		t.Fatalf("unexpected devcontainer tag %q", tag)
	}
	t.Cleanup(func() {
		removeContainers(e.RepoID())
		removeWarmImages(e.RepoID()) // children of the tag
		removeImage(tag)
	})
	return tag
}

// TestDevcontainerStart: start builds the sandbox image from the
// repository's devcontainer (a Dockerfile on the offline base that adds the
// project's tool, standing in for python3), runs postCreateCommand as setup,
// applies containerEnv and remoteEnv but not a credential, ignores
// privileged and a host mount with a message each; the agent runs the tool,
// and a pre-commit hook of the user's that needs the tool passes on the
// agent's commit. A second sandbox reuses the image; --image skips the
// devcontainer entirely.
func TestDevcontainerStart(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.WriteFile(".devcontainer/devcontainer.json", `{
	"build": {"dockerfile": "Dockerfile", "context": ".."},
	"postCreateCommand": "projtool --setup > /var/tmp/setup-marker",
	"containerEnv": {"PROJ_MODE": "dev", "GITHUB_TOKEN": "from-the-repo"},
	"remoteEnv": {"PATH": "${containerEnv:PATH}:/opt/proj/bin"},
	"privileged": true,
	"mounts": ["source=/,target=/host,type=bind"],
}
`)
	// The comment makes this run's image its own: a run killed before its
	// cleanup leaves a tag the next run must not reuse.
	e.WriteFile(".devcontainer/Dockerfile", fmt.Sprintf("# run %d\nFROM %s\nCOPY tools/projtool /usr/local/bin/projtool\n", time.Now().UnixNano(), baseImage))
	e.WriteFile("tools/projtool", "#!/bin/sh\necho \"projtool ran: $*\"\n")
	must(t, os.Chmod(filepath.Join(e.Repo, "tools", "projtool"), 0o755))
	e.Git("add", "-A")
	e.Git("commit", "-q", "-m", "devcontainer")
	// The user's own pre-commit hook needs the project's tool.
	e.WriteFile(".git/hooks/pre-commit", "#!/bin/sh\nprojtool --hook >&2 || exit 1\n")
	must(t, os.Chmod(filepath.Join(e.Repo, ".git", "hooks", "pre-commit"), 0o755))

	script := `projtool --from-agent; cat /var/tmp/setup-marker
echo "PROJ_MODE=$PROJ_MODE TOKEN=${GITHUB_TOKEN:-unset}"
case ":$PATH:" in *:/opt/proj/bin:*) echo "PATH extended";; esac
test -e /host/etc || echo "no host mount"
echo change > f.txt && git add f.txt && git commit -qm "agent change" && echo committed`
	r := e.MustSandbox("start", "dc1", "--agent", "shell", "--", "sh", "-c", script)
	tag := devTag(t, e, r.Stderr)
	for _, want := range []string{
		"warning: .devcontainer/devcontainer.json: privileged ignored: a sandbox is never privileged",
		"warning: .devcontainer/devcontainer.json: mounts ignored: mounts come only from your own config",
		"warning: .devcontainer/devcontainer.json: containerEnv.GITHUB_TOKEN ignored",
		"built " + tag + "; agent CLIs: none",
		"projtool ran: --hook", // the hook's output, on stderr
	} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("start's stderr lacks %q:\n%s", want, r)
		}
	}
	for _, want := range []string{"projtool ran: --from-agent", "projtool ran: --setup", "PROJ_MODE=dev TOKEN=unset", "PATH extended", "no host mount", "committed"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, r)
		}
	}
	if p := e.PsOf("dc1"); p.State != "exited" {
		t.Errorf("ps: %+v", p)
	}

	// Unchanged inputs: the same image, nothing built, and setup skipped:
	// the first start kept its result as a warm image of that image.
	r = e.MustSandbox("start", "dc2", "--agent", "shell", "--", "sh", "-c", "cat /var/tmp/setup-marker")
	if strings.Contains(r.Stderr, "building image") || !strings.Contains(r.Stderr, "image "+tag+" (from .devcontainer/devcontainer.json, unchanged)") ||
		!strings.Contains(r.Stdout, "projtool ran: --setup") || !strings.Contains(r.Stderr, "setup skipped: image git-sandbox-warm:") {
		t.Errorf("second start: %s", r)
	}

	// --image wins, and the devcontainer is not used at all.
	r = e.MustSandbox("start", "dc3", "--image", testImage, "--agent", "shell", "--", "sh", "-c", "command -v projtool || echo no projtool; test -e /var/tmp/setup-marker || echo no setup")
	if strings.Contains(r.Stderr, "devcontainer") || !strings.Contains(r.Stdout, "no projtool") || !strings.Contains(r.Stdout, "no setup") {
		t.Errorf("start --image: %s", r)
	}

	// Once no sandbox uses them, prune keeps the newest warm image (made
	// on the devcontainer image, which inherits its labels) and so the
	// devcontainer image it was made from.
	for _, b := range []string{"dc1", "dc2", "dc3"} {
		e.MustSandbox("rm", "-f", b)
	}
	r = e.MustSandbox("image", "prune")
	if !strings.Contains(r.Stderr, "kept "+tag+": the warm image git-sandbox-warm:") || strings.Contains(r.Stderr, "removed image") {
		t.Errorf("prune: %s", r)
	}
	if len(warmImages(t, e.RepoID())) != 1 || imageID(tag) == "" {
		t.Errorf("prune removed the newest warm image or its devcontainer image")
	}
}

// TestPublishPorts: a server the agent starts is reached from the host on
// 127.0.0.1 at the port start chose (and at one given), and not on the
// host's other addresses; ports and ps --json say where.
func TestPublishPorts(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	fixed, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	serve := `for p in 3000 4000; do perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalAddr => "0.0.0.0", LocalPort => $ARGV[0], Listen => 5, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "hello from port $ARGV[0]\n"; close $c }' $p & done; wait`
	r := e.MustSandbox("start", "srv", "-d", "--network", "open", "--publish", "3000", "--publish", strconv.Itoa(fixed)+":4000", "--agent", "shell", "--", "sh", "-c", serve)
	if !strings.Contains(r.Stderr, "port 3000 published on 127.0.0.1:") {
		t.Errorf("start does not say where the port went: %s", r)
	}
	var list []struct {
		Branch string `json:"branch"`
		Ports  []struct {
			HostIP   string `json:"host_ip"`
			HostPort int    `json:"host_port"`
			Port     int    `json:"port"`
		} `json:"ports"`
	}
	ps := e.MustSandbox("ps", "--json")
	must(t, json.Unmarshal([]byte(ps.Stdout), &list))
	if len(list) != 1 || len(list[0].Ports) != 2 || list[0].Ports[0].Port != 3000 || list[0].Ports[0].HostIP != "127.0.0.1" ||
		list[0].Ports[0].HostPort == 0 || list[0].Ports[1].HostPort != fixed {
		t.Fatalf("ps --json: %s", ps.Stdout)
	}
	auto := list[0].Ports[0].HostPort
	out := e.MustSandbox("ports", "srv")
	if want := fmt.Sprintf("3000 -> 127.0.0.1:%d\n4000 -> 127.0.0.1:%d\n", auto, fixed); out.Stdout != want {
		t.Errorf("ports: %q, want %q", out.Stdout, want)
	}
	for port, host := range map[int]int{3000: auto, 4000: fixed} {
		var got string
		Eventually(t, 30*time.Second, fmt.Sprintf("the server on port %d answers on 127.0.0.1:%d", port, host), func() bool {
			got = dialRead("127.0.0.1", host)
			return got != ""
		})
		if got != fmt.Sprintf("hello from port %d\n", port) {
			t.Errorf("127.0.0.1:%d answered %q", host, got)
		}
		// Not on any other address of this machine.
		for _, ip := range hostAddresses(t) {
			if got := dialRead(ip, host); got != "" {
				t.Errorf("%s:%d answered %q: published beyond loopback", ip, host, got)
			}
		}
	}
}

// dialRead connects and returns what the server says, "" when nothing
// answers.
func dialRead(ip string, port int) string {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// hostAddresses lists this machine's IPv4 addresses other than loopback.
func hostAddresses(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	if len(out) == 0 {
		t.Fatal("no non-loopback address to check against")
	}
	return out
}

// nonRootEnv is NewEnv for an unprivileged user when the suite runs as
// root (as sandboxes of real users run), else NewEnv.
func nonRootEnv(t *testing.T) *Env {
	t.Helper()
	if os.Getuid() != 0 {
		return NewEnv(t)
	}
	cred := testUser(t)
	root := t.TempDir()
	for p := root; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		must(t, os.Chmod(p, 0o755))
	}
	return newEnvAt(t, root, cred)
}

// removeCacheVolumes removes the cache volumes of a test repository (after
// its containers).
func removeCacheVolumes(repoID string) {
	removeContainers(repoID)
	out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=git-sandbox.cache", "--filter", "label=git-sandbox.repo="+repoID).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"volume", "rm", "-f"}, ids...)...).Run()
	}
}

// TestCaches: a [[cache]] of the user's config is a volume per repository:
// what one sandbox (run as an unprivileged user) writes there the next
// sandbox of the same repository reads, another repository's sandbox does
// not see it; doctor lists it and image prune --caches removes it.
func TestCaches(t *testing.T) {
	t.Parallel()
	const target = "/home/sandbox/.cache/proj"
	config := "base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n[[cache]]\ntarget = \"" + target + "\"\n"
	e := nonRootEnv(t)
	e.WriteConfig(config, baseImage)
	t.Cleanup(func() { removeCacheVolumes(e.RepoID()) })
	other := NewEnv(t)
	other.WriteConfig(config, baseImage)
	t.Cleanup(func() { removeCacheVolumes(other.RepoID()) })

	r := e.MustSandbox("start", "c1", "--agent", "shell", "--", "sh", "-c", "echo written-by-c1 > "+target+"/marker && echo wrote")
	if !strings.Contains(r.Stdout, "wrote") || !strings.Contains(r.Stderr, "cache "+target+": new volume git-sandbox-cache-") {
		t.Fatalf("first sandbox: %s", r)
	}
	r = e.MustSandbox("start", "c2", "--agent", "shell", "--", "sh", "-c", "cat "+target+"/marker")
	if r.Stdout != "written-by-c1\n" || strings.Contains(r.Stderr, "new volume") {
		t.Errorf("second sandbox of the repository: %s", r)
	}
	r = other.MustSandbox("start", "c1", "--agent", "shell", "--", "sh", "-c", "cat "+target+"/marker 2>/dev/null || echo absent")
	if r.Stdout != "absent\n" {
		t.Errorf("another repository's sandbox: %s", r)
	}
	if d := e.Sandbox("doctor"); !strings.Contains(d.Stdout, "ok   cache "+target+": volume git-sandbox-cache-") {
		t.Errorf("doctor: %s", d)
	}
	// In use by the sandboxes' containers: kept.
	if r := e.MustSandbox("image", "prune", "--caches"); !strings.Contains(r.Stderr, "kept cache") {
		t.Errorf("prune while in use: %s", r)
	}
	e.MustSandbox("rm", "-f", "c1")
	e.MustSandbox("rm", "-f", "c2")
	if r := e.MustSandbox("image", "prune", "--caches"); !strings.Contains(r.Stderr, "removed cache git-sandbox-cache-") {
		t.Errorf("prune: %s", r)
	}
	out, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+e.RepoID()).Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("volumes left after prune: %q %v", out, err)
	}
	// The other repository's cache is untouched.
	out, _ = exec.Command("docker", "volume", "ls", "-q", "--filter", "label=git-sandbox.repo="+other.RepoID()).Output()
	if strings.TrimSpace(string(out)) == "" {
		t.Errorf("prune removed another repository's cache")
	}
}
