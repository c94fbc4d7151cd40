package e2e

// The adversarial suite, third round, holes 3 and 4: what a repository's
// devcontainer may choose and do at build time. A devcontainer.json (or
// its Dockerfile) chose a local image with a key baked in, which its agent
// read, although the same name in .sandbox.toml was refused; and the
// image build ran on the engine's default bridge, where a RUN step reached
// a port this machine listens on although the sandbox's network was none.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// atkBakedImage builds a local image holding a key, as a user's private
// image might, tags it for this test alone and removes it when the test
// ends.
func atkBakedImage(t *testing.T, name string) string {
	t.Helper()
	tag := fmt.Sprintf("git-sandbox-test:baked-%s-%d", name, os.Getpid())
	// A label of its own makes an image of its own: two tests' images of
	// the same layers would share an id, and so the devcontainer images
	// built from them a tag, which one test's cleanup removes from
	// under the other.
	nonce := make([]byte, 6)
	_, _ = rand.Read(nonce)
	build := exec.Command("docker", "build", "-q", "-t", tag, "-")
	build.Stdin = strings.NewReader("FROM " + baseImage + "\nRUN echo canary-baked-31337 > /etc/baked-secret\nLABEL git-sandbox-test.nonce=" + hex.EncodeToString(nonce) + "\n")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", tag, err, out)
	}
	t.Cleanup(func() { removeImage(tag) })
	return tag
}

const atkBakedAgent = `cat /etc/baked-secret 2>/dev/null | grep -q canary-baked && echo "ARMED: SECRET"
echo AGENT-DONE
`

// atkNothingMade fails the test if a refused start of branch left anything:
// a sandbox, branch, worktree, container, network or devcontainer image.
func (e *Env) atkNothingMade(branch string) {
	e.t.Helper()
	if e.hasSandbox(branch) {
		e.t.Errorf("ps lists the refused sandbox %s", branch)
	}
	if r := e.Run(e.Repo, nil, "git", "rev-parse", "--verify", "-q", "refs/heads/"+branch); r.Code == 0 {
		e.t.Errorf("branch %s was created", branch)
	}
	if wl := e.Git("worktree", "list", "--porcelain"); strings.Contains(wl, branch) {
		e.t.Errorf("a worktree was registered:\n%s", wl)
	}
	for what, args := range map[string][]string{
		"containers":          {"ps", "-aq", "--filter", "label=git-sandbox.repo=" + e.RepoID()},
		"networks":            {"network", "ls", "-q", "--filter", "label=git-sandbox.repo=" + e.RepoID()},
		"devcontainer images": {"images", "-q", "--filter", "label=git-sandbox.devcontainer.repo=" + e.RepoID()},
	} {
		if out, _ := exec.Command("docker", args...).Output(); strings.TrimSpace(string(out)) != "" {
			e.t.Errorf("%s were made: %s", what, out)
		}
	}
}

// Every way a repository's devcontainer names an image — its image, its
// Dockerfile's FROM, a COPY --from of another stage's image — goes through
// the user's allowed_images before anything is built or made, as
// .sandbox.toml's image does; so does the image the pre-push verify would
// run. Allowed, each of them hands the key to the agent: the refusal is
// what kept it out.
func TestAttackDevcontainerChoosesAnImage(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	secret := atkBakedImage(t, "dev")
	cases := []struct {
		name  string
		files map[string]string
		where string
	}{
		{"image", map[string]string{".devcontainer.json": "{\n  \"image\": \"" + secret + "\"\n}\n"}, ".devcontainer.json line 2 (image)"},
		{"from", map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile":        "# from\nFROM " + secret + "\n",
		}, ".devcontainer/Dockerfile line 2 (FROM)"},
		{"copy-from", map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "args": {"KEYS": "` + secret + `"}}}`,
			".devcontainer/Dockerfile":        "ARG KEYS=nothing\nFROM " + baseImage + " AS keys\nFROM $KEYS AS stolen\nFROM keys\nCOPY --from=stolen /etc/baked-secret /etc/baked-secret\n",
		}, ".devcontainer/Dockerfile line 3 (FROM)"},
		{"copy-from-image", map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile":        "FROM " + baseImage + " AS keys\nFROM keys\nCOPY --from=" + secret + " /etc/baked-secret /etc/baked-secret\n",
		}, ".devcontainer/Dockerfile line 3 (COPY --from)"},
	}
	for _, c := range cases {
		_ = os.RemoveAll(e.Repo + "/.devcontainer")
		_ = os.Remove(e.Repo + "/.devcontainer.json")
		for f, body := range c.files {
			e.WriteFile(f, body)
		}
		e.Git("add", "-A")
		e.Git("commit", "-qm", "a hostile repository's devcontainer: "+c.name)
		before := e.HostState()
		r := e.Sandbox("start", c.name, "--agent", "shell", "--", "sh", "-c", atkBakedAgent)
		if r.Code == 0 || strings.Contains(r.Stdout, "SECRET") {
			t.Errorf("ATTACK SUCCEEDED (%s): the devcontainer's image ran without the user's allowance: %s", c.name, r)
		}
		if !strings.Contains(r.Stderr, secret+" from "+c.where) || !strings.Contains(r.Stderr, "allowed_images") || strings.Contains(r.Stderr, "building image") {
			t.Errorf("%s: the refusal does not name the image, where it comes from and the setting, or came after a build: %s", c.name, r)
		}
		e.atkNothingMade(c.name)
		e.AssertSameHostState(before)
		if dry := e.Sandbox("start", c.name, "--dry-run", "--agent", "shell", "--", "true"); !strings.Contains(dry.Stderr, "names the image "+secret+", which you have not allowed") {
			t.Errorf("%s: start --dry-run does not say the image is not allowed: %s", c.name, dry)
		}
	}

	// Allowed, every one of them gives the agent the key.
	e.WriteConfig("base_image = %q\nallowed_images = [%q]\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage, secret)
	for _, c := range cases {
		e.Git("checkout", "-q", "-b", "armed-"+c.name, "main")
		_ = os.RemoveAll(e.Repo + "/.devcontainer")
		_ = os.Remove(e.Repo + "/.devcontainer.json")
		for f, body := range c.files {
			e.WriteFile(f, body)
		}
		e.Git("add", "-A")
		e.Git("commit", "-q", "--allow-empty", "-m", "armed: "+c.name)
		r := e.atkStart("armed-run-"+c.name, atkBakedAgent)
		devTag(t, e, r.Stderr)
		atkArmed(t, r.Stdout+r.Stderr, "SECRET")
		e.MustSandbox("rm", "-f", "armed-run-"+c.name)
	}
	e.Git("checkout", "-q", "main")

	// The pre-push verify runs the image .sandbox.toml names: the same
	// policy, with no terminal to ask on.
	withRemote(t, e)
	e.WriteConfig("base_image = %q\nverify_before_push = true\n[limits]\npids = 256\n", baseImage)
	e.WriteFile(".sandbox.toml", fmt.Sprintf("image = %q\nverify = \"grep -q canary-baked /etc/baked-secret && exit 1; true\"\n", secret))
	e.Git("add", "-A")
	e.Git("commit", "-qm", "a hostile repository's verify image")
	e.MustSandbox("hooks", "install")
	r := e.push("main")
	if r.Code == 0 || !strings.Contains(r.Stderr, secret+" from .sandbox.toml line 1 (image)") || strings.Contains(r.Stderr, "verifying") {
		t.Errorf("ATTACK SUCCEEDED: the pre-push verify ran the repository's image without the user's allowance: %s", r)
	}
	if out, _ := exec.Command("docker", "ps", "-aq", "--filter", "label=git-sandbox.repo="+e.RepoID(), "--filter", "label=git-sandbox.role=verify").Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("verify containers were made: %s", out)
	}
}

// atkBuildReach is a build step's script (bash; the test image has no
// curl): for each ADDR:PORT argument, and for the step's own default
// gateway at the same port, it tries a direct connection and, when the
// build has a proxy, one through it (CONNECT), and writes "TRIED HOW
// ADDR:PORT [the lines that came back]" to /opt/reach.txt, where the test
// reads it from the image.
const atkBuildReach = `port=${1##*:}
gw=
while read -r iface dest gate rest; do
	if [ "$dest" = 00000000 ]; then
		h=$gate; gw=$(printf '%d.%d.%d.%d' 0x${h:6:2} 0x${h:4:2} 0x${h:2:2} 0x${h:0:2}); break
	fi
done < /proc/net/route
lines() { for i in 1 2 3 4 5; do read -t 3 l <&3 || break; printf '%s|' "$l"; done; }
for a in "$@" ${gw:+$gw:$port}; do
	got=$( (timeout 8 bash -c "exec 3<>/dev/tcp/${a%:*}/${a##*:} && $(declare -f lines); lines") 2>/dev/null)
	echo "TRIED direct $a [$got]" >> /opt/reach.txt
	p=${http_proxy:-}; p=${p#http://}
	if [ -n "$p" ]; then
		got=$( (timeout 8 bash -c "exec 3<>/dev/tcp/${p%:*}/${p##*:} && printf 'CONNECT $a HTTP/1.1\r\nHost: $a\r\n\r\n' >&3 && $(declare -f lines); lines") 2>/dev/null)
		echo "TRIED proxy $a [$got]" >> /opt/reach.txt
	fi
done
echo "gateway: ${gw:-none}" >> /opt/reach.txt
`

// atkBuildFetch is a build step that needs a host: a plain HTTP request
// through the build's proxy, failing the build unless it is answered.
const atkBuildFetch = `p=${http_proxy#http://}
exec 3<>/dev/tcp/${p%:*}/${p##*:} || exit 1
printf 'GET http://deb.denied.test/dists HTTP/1.1\r\nHost: deb.denied.test\r\nConnection: close\r\n\r\n' >&3
read -r s <&3
case "$s" in *" 200 "*) ;; *) echo "fetch failed: $s"; exit 1;; esac
`

// A devcontainer build runs the repository's code: under network none it
// has no network at all, under the allowlist it is on the sandbox's
// internal network with only the proxy to talk to. Its RUN step tries
// this machine's listener at the default bridge's gateway, the egress
// network's, its own default gateway and every address of this machine,
// directly and through the proxy: the listener is reached by none. The
// same step on the default bridge (what the build used before) reaches
// it. A build that needs a host the policy denies names it.
func TestAttackDevcontainerBuildReachesNoHost(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	egressNet := e.egressNetwork()
	if out, err := exec.Command("docker", "network", "create", egressNet).CombinedOutput(); err != nil {
		t.Fatalf("create %s: %v\n%s", egressNet, err, out)
	}
	e.WriteConfig("base_image = %q\negress_network = %q\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage, egressNet)
	token := "HOST-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	targets := atkHostTargets(t, token, egressNet)

	// Armed: from the engine's default bridge, the step reaches the
	// listener, so a build there would have.
	ctl, err := exec.Command("docker", append([]string{"run", "--rm", "--network", "bridge", baseImage, "bash", "-c", atkBuildReach + "cat /opt/reach.txt", "reach"}, targets...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(ctl), token) {
		t.Fatalf("the step does not reach the listener from the default bridge, so the test proves nothing: %v\n%s", err, ctl)
	}

	e.WriteFile(".devcontainer/devcontainer.json", `{"build": {"dockerfile": "Dockerfile"}}`)
	e.WriteFile(".devcontainer/reach.sh", atkBuildReach)
	e.WriteFile(".devcontainer/fetch.sh", atkBuildFetch)
	for _, mode := range []string{"none", "allowlist"} {
		e.WriteFile(".devcontainer/Dockerfile", "# "+mode+"\nFROM "+baseImage+"\nCOPY reach.sh /opt/reach.sh\nRUN bash /opt/reach.sh "+strings.Join(targets, " ")+"\n")
		e.Git("add", "-A")
		e.Git("commit", "-qm", "a devcontainer whose build calls home: "+mode)
		r := e.MustSandbox("start", "reach-"+mode, "--network", mode, "--agent", "shell", "--", "true")
		tag := devTag(t, e, r.Stderr)
		got := runIn(t, tag, nil, "cat /opt/reach.txt")
		t.Logf("%s: what the build's step reached:\n%s", mode, got)
		want := len(targets)
		if !strings.Contains(got, "gateway: none") {
			want++
		}
		if n := strings.Count(got, "TRIED direct"); n != want || want == 0 {
			t.Errorf("%s: the step tried %d addresses, want %d: it did not run as armed\n%s", mode, n, want, got)
		}
		if mode == "allowlist" && strings.Count(got, "TRIED proxy") != want {
			t.Errorf("allowlist: the step had no proxy to try:\n%s", got)
		}
		if strings.Contains(got, token) {
			t.Errorf("ATTACK SUCCEEDED: the build (network %s) reached this machine's listener:\n%s", mode, got)
		}
		e.MustSandbox("rm", "-f", "reach-"+mode)
		removeImage(tag)
	}

	// A build that needs a host the policy denies fails and names it.
	e.WriteFile(".devcontainer/Dockerfile", "FROM "+baseImage+"\nCOPY fetch.sh /opt/fetch.sh\nRUN bash /opt/fetch.sh\n")
	e.Git("add", "-A")
	e.Git("commit", "-qm", "a devcontainer whose build needs a host")
	r := e.Sandbox("start", "denied", "--agent", "shell", "--", "true")
	if r.Code == 0 || !strings.Contains(r.Stderr, "denied the build deb.denied.test:80") || !strings.Contains(r.Stderr, "--allow deb.denied.test") {
		t.Errorf("a build the policy denied a host does not name it: %s", r)
	}
	e.atkNothingMade("denied")
}
