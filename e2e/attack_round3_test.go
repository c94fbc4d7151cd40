package e2e

// The adversarial suite, third round: the open items of the second
// review — the network between sandboxes and to this machine, nested
// repositories in a worktree, and what snapshots may cost the host. Each
// test arms its attack inside the container first, then asserts that the
// host-side effect is absent.

import (
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// atkListener is an agent that listens on TCP port 8080 of every address
// it has and answers each connection with HELLO-$ATK_NAME, then waits. A
// connection is only proof of reaching it with that line: where this
// machine's own network accepts connections to any address, connecting
// proves nothing.
const atkListener = `perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => 8080, Listen => 5, ReuseAddr => 1) or die "listen: $!"; while ($c = $s->accept) { print $c "HELLO-$ENV{ATK_NAME}\n"; close $c }' &
sleep 1
echo LISTENING
exec sleep 600
`

// atkReach is a probe run in a sandbox: for each ADDR:PORT argument it
// prints "TRIED ADDR:PORT [the first line the other end sent]".
const atkReach = `for a in "$@"; do l=$(timeout 5 bash -c "exec 3<>/dev/tcp/${a%:*}/${a##*:} && read -t 3 l <&3 && echo \"\$l\"" 2>/dev/null); echo "TRIED $a [$l]"; done`

// atkHostTargets listens on a port of this machine (every address),
// answering each connection with the line token, and returns the
// addresses:port a container could try to reach it at: the gateways of
// the given networks and of the default bridge, and every address of this
// machine's interfaces.
func atkHostTargets(t *testing.T, token string, networks ...string) []string {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(token + "\n"))
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	seen := map[string]bool{}
	var out []string
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a+":"+port)
		}
	}
	for _, n := range append(networks, "bridge") {
		add(networkGateway(t, n))
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
				add(p.Addr().String())
			}
		}
	}
	return out
}

// atkNetworkOf returns the one network a sandbox's agent container joins
// and its address there.
func (e *Env) atkNetworkOf(branch string) (name, ip string) {
	e.t.Helper()
	c := e.PsOf(branch).Container
	out, err := exec.Command("docker", "inspect", "--format", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{$v.IPAddress}}\n{{end}}", c).Output()
	if err != nil {
		e.t.Fatalf("docker inspect %s: %v", c, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 1 {
		e.t.Fatalf("%s joins %d networks, want one: %q", branch, len(lines), lines)
	}
	f := strings.Fields(lines[0])
	if len(f) != 2 {
		e.t.Fatalf("%s: no address on its network: %q", branch, lines[0])
	}
	return f[0], f[1]
}

// ---------------------------------------------------------------------------
// 5. The network: from a sandbox the agent reached a service of this
// machine through the gateway, and another sandbox's listener (open mode
// put every sandbox on the engine's default bridge, inter-container
// traffic on). In allowlist mode neither is reachable; in open mode no
// sandbox shares a network with another, so no other sandbox is.

func TestAttackNetworkReachesNoOtherSandboxNorHost(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	// Two victims listening, one per mode, and one attacker per mode.
	for _, s := range []struct{ name, network string }{
		{"victim-allow", "allowlist"}, {"victim-open", "open"}, {"atk-allow", "allowlist"}, {"atk-open", "open"},
	} {
		agent := atkListener
		if strings.HasPrefix(s.name, "atk-") {
			// No listener of its own that a probe could find instead.
			agent = "echo LISTENING; exec sleep 600"
		}
		e.MustSandbox("start", s.name, "-d", "--network", s.network, "-e", "ATK_NAME="+s.name, "--agent", "shell", "--", "sh", "-c", agent)
	}
	for _, v := range []string{"victim-allow", "victim-open", "atk-allow", "atk-open"} {
		Eventually(t, 60*time.Second, v+" listening", func() bool {
			return strings.Contains(e.Sandbox("logs", v).Stdout, "LISTENING")
		})
	}
	victims := map[string]string{}
	for _, v := range []string{"victim-allow", "victim-open"} {
		n, ip := e.atkNetworkOf(v)
		victims[v] = ip + ":8080"
		// Armed: each victim's listener answers at that address.
		if r := e.MustSandbox("exec", v, "--", "bash", "-c", atkReach, "probe", victims[v]); !strings.Contains(r.Stdout, "[HELLO-"+v+"]") {
			t.Fatalf("%s does not reach its own listener at %s: the test would prove nothing:\n%s", v, victims[v], r)
		}
		if v == "victim-open" {
			if n == "bridge" {
				t.Errorf("ATTACK SURFACE: the open-mode sandbox is on the engine's default bridge, shared with every container")
			}
			out, _ := exec.Command("docker", "network", "inspect", "--format", "{{.Internal}} {{index .Options \"com.docker.network.bridge.enable_icc\"}}", n).Output()
			if got := strings.TrimSpace(string(out)); got != "false false" {
				t.Errorf("open network %s: internal, inter-container traffic = %q, want \"false false\"", n, got)
			}
		}
	}
	for _, atk := range []string{"atk-allow", "atk-open"} {
		n, ip := e.atkNetworkOf(atk)
		t.Logf("%s: %s on %s; victims %v", atk, ip, n, victims)
		for v, addr := range victims {
			reached := func() (bool, Result) {
				r := e.MustSandbox("exec", atk, "--", "bash", "-c", atkReach, "probe", addr)
				return !strings.Contains(r.Stdout, "TRIED "+addr) || strings.Contains(r.Stdout, "HELLO-"), r
			}
			ok, r := reached()
			if ok && atk == "atk-open" {
				// Between two routed bridges the engine's isolation rules
				// are deleted and inserted again whenever any network is
				// made (other tests make them all the time): a probe can
				// pass in that moment. Documented in SECURITY.md; what
				// must hold is that it does not pass otherwise.
				t.Logf("%s reached %s once (the engine's rule update?); probing again:\n%s", atk, v, r)
				for i := 0; i < 3 && ok; i++ {
					time.Sleep(time.Second)
					ok, r = reached()
				}
			}
			if ok {
				t.Errorf("ATTACK SUCCEEDED: %s reached %s's listener at %s:\n%s", atk, v, addr, r)
			}
		}
		token := "HOST-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		host := atkHostTargets(t, token, n)
		r := e.MustSandbox(append([]string{"exec", atk, "--", "bash", "-c", atkReach, "probe"}, host...)...)
		if atk == "atk-allow" {
			if strings.Contains(r.Stdout, token) || strings.Count(r.Stdout, "TRIED") != len(host) {
				t.Errorf("ATTACK SUCCEEDED: the allowlist sandbox reached this machine's port:\n%s", r)
			}
		} else {
			// Documented in SECURITY.md: the engine cannot keep a routed
			// bridge from the host's own addresses.
			t.Logf("open mode, this machine's addresses (reachable by design):\n%s", r.Stdout)
		}
	}
	// rm takes the open sandbox's own network with it.
	openNet, _ := e.atkNetworkOf("victim-open")
	e.MustSandbox("rm", "--force", "victim-open")
	if out, err := exec.Command("docker", "network", "inspect", openNet).CombinedOutput(); err == nil {
		t.Errorf("rm left the open network %s:\n%s", openNet, out)
	}
}

// ---------------------------------------------------------------------------
// 1. A nested repository: the agent runs git init src and sets
// core.fsmonitor there; the user's own git status in <worktree>/src (a
// shell prompt, an editor scanning the worktree) ran it on the host. While
// the agent does not run, the git directories of nested repositories are
// kept out of the worktree; while it runs, ps, diff and start name them.

const atkNestedFsmonitorAgent = atkPrelude + `
if [ -e src/.git ]; then
	echo "RESUMED: $(git -C src log --format=%s)"
	echo AGENT-DONE
	exec sleep 600
fi
G="git -c user.name=a -c user.email=a@example.com -c core.hooksPath=/dev/null"
git init -q src
(cd src && echo s > s.txt && $G add s.txt && $G commit -q -m nested-commit)
git -C src config core.fsmonitor "$(cmd SRCFSM); :"
git -C src config core.pager "$(cmd SRCPAGER); cat"
echo 'uncommitted work' > src/work.txt
git init -q empty
git -C empty config core.fsmonitor "$(cmd EMPTYFSM); :"
echo node_modules/ > .gitignore
mkdir -p node_modules && git init -q node_modules/pkg
git -C node_modules/pkg config core.fsmonitor "$(cmd IGNFSM); :"
mkdir -p tools && git init -q --bare tools/bare.git
git --git-dir=tools/bare.git config core.bare false
git --git-dir=tools/bare.git config core.worktree ..
git --git-dir=tools/bare.git config core.fsmonitor "$(cmd BAREFSM); :"
echo top > top.txt
set +e
armed SRCFSM "cd src && git status"
armed EMPTYFSM "cd empty && git status"
armed IGNFSM "cd node_modules/pkg && git status"
armed BAREFSM "cd tools/bare.git && git status"
echo AGENT-DONE
`

// atkHostGitIn runs what a user (or their prompt and editor) runs in each
// directory of a worktree, plainly and on a terminal, and fails the test
// if the marker appears. A directory that is not there is skipped.
func (e *Env) atkHostGitIn(wt, mark, when string, dirs ...string) {
	e.t.Helper()
	for _, dir := range dirs {
		p := filepath.Join(wt, dir)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		e.Run(p, nil, "git", "status")
		e.Run(p, nil, "git", "log", "-1")
		e.atkOnTerminal(p, "git status; git log -1; git diff")
		e.atkNoMark(mark, "git status and log in "+dir+" "+when)
	}
}

func TestAttackNestedRepositoryRunsNothingOnHost(t *testing.T) {
	t.Parallel()
	e, mark, _ := atkEnv(t)
	r := e.atkStart("nest", atkNestedFsmonitorAgent, "MARK="+mark)
	atkArmed(t, r.Stdout, "SRCFSM", "EMPTYFSM", "IGNFSM", "BAREFSM")
	e.atkNoMark(mark, "the agent's run")
	wt := e.Worktree("nest")
	dirs := []string{"src", "empty", "node_modules/pkg", "tools/bare.git", "tools", "."}
	e.atkHostGitIn(wt, mark, "after the agent exited", dirs...)
	for _, p := range []string{"src/.git", "empty/.git", "node_modules/pkg/.git", "tools/bare.git/HEAD"} {
		if _, err := os.Lstat(filepath.Join(wt, p)); err == nil {
			t.Errorf("ATTACK SURFACE: %s is in the worktree while the agent is stopped", p)
		}
	}
	e.atkSession("nest", mark)
	tree := func() string {
		t.Helper()
		return e.Git("rev-parse", "refs/sandbox/nest/rescue^{tree}")
	}
	stopped := tree()

	// Started again, the agent finds its repositories as it left them,
	// and start names them.
	s := e.MustSandbox("start", "nest", "-d", "--rerun")
	for _, p := range []string{"src", "empty", "node_modules/pkg"} {
		if !strings.Contains(s.Stderr, filepath.Join(wt, p)+" is a nested git repository") {
			t.Errorf("start does not name the nested repository %s:\n%s", p, s)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(e.Sandbox("logs", "nest").Stdout, "RESUMED") {
		if time.Now().After(deadline) {
			t.Fatalf("the resumed agent did not say RESUMED:\nstart: %s\nlogs: %s", s, e.Sandbox("logs", "nest"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if l := e.Sandbox("logs", "nest").Stdout; !strings.Contains(l, "RESUMED: nested-commit") {
		t.Errorf("the agent's nested repository did not come back whole:\n%s", l)
	}
	if _, err := os.Lstat(filepath.Join(wt, "tools/bare.git/HEAD")); err != nil {
		t.Errorf("the bare layout's HEAD did not come back: %v", err)
	}
	// While it runs, ps and diff name them.
	Eventually(t, 60*time.Second, "ps to name the nested repository", func() bool {
		return strings.Contains(e.Sandbox("ps").Stderr, filepath.Join(wt, "src")+" is a nested git repository")
	})
	if d := e.Sandbox("diff", "nest"); !strings.Contains(d.Stderr, filepath.Join(wt, "src")+" is a nested git repository") {
		t.Errorf("diff of the running sandbox does not name the nested repository:\n%s", d)
	}
	if got := tree(); got != stopped {
		t.Errorf("a snapshot while running holds tree %s, while stopped %s: quarantine changed what snapshots see", got, stopped)
	}
	// Stopped, they are out of the way again.
	e.MustSandbox("stop", "nest")
	if _, err := os.Lstat(filepath.Join(wt, "src/.git")); err == nil {
		t.Errorf("ATTACK SURFACE: src/.git is in the worktree after stop")
	}
	e.atkHostGitIn(wt, mark, "after stop", dirs...)
	if got := tree(); got != stopped {
		t.Errorf("the stop snapshot holds tree %s, not %s", got, stopped)
	}
}

// ---------------------------------------------------------------------------
// 15. Work in a nested repository: its files were recorded only as a
// gitlink, no snapshot held them, and land (or rm) deleted the worktree.

const atkNestedWorkAgent = `
set -e
G="git -c user.name=a -c user.email=a@example.com"
git init -q lib
(cd lib && echo one > one.txt && $G add one.txt && $G commit -q -m lib)
echo 'work only here' > lib/work.txt
echo 'landable' > top.txt
echo AGENT-DONE
`

func TestAttackNestedRepositoryWorkIsNotLost(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.atkStart("lost", atkNestedWorkAgent)
	wt := e.Worktree("lost")
	// Armed: no snapshot holds the nested repository's files.
	snaps := e.Snapshots("lost")
	if len(snaps) == 0 {
		t.Fatal("no snapshots")
	}
	if x := e.Run(e.Repo, nil, "git", "cat-file", "-e", snaps[0].ID+":lib/work.txt"); x.Code == 0 {
		t.Fatalf("the snapshot holds lib/work.txt: the test would prove nothing")
	}
	oldMain := e.Git("rev-parse", "main")
	for _, args := range [][]string{{"land", "lost"}, {"rm", "lost"}} {
		r := e.Sandbox(args...)
		if r.Code == 0 {
			t.Errorf("ATTACK SUCCEEDED: git sandbox %s went ahead with lib's files in no snapshot: %s", args[0], r)
			break
		}
		if r.Code != 4 || !strings.Contains(r.Stderr, "nested git repositor") || !strings.Contains(r.Stderr, "lib") || !strings.Contains(r.Stderr, "--force") {
			t.Errorf("git sandbox %s: no clear refusal naming lib: %s", args[0], r)
		}
		if got := readFile(filepath.Join(wt, "lib", "work.txt")); got != "work only here\n" {
			t.Fatalf("ATTACK SUCCEEDED: after %s, lib/work.txt is %q", args[0], got)
		}
	}
	if got := e.Git("rev-parse", "main"); got != oldMain {
		t.Errorf("a refused land moved main")
	}
	if d := e.Sandbox("diff", "lost"); !strings.Contains(d.Stderr, "lib is a nested git repository: its files are in no snapshot") {
		t.Errorf("diff does not say lib's files are in no snapshot:\n%s", d)
	}
	// --force goes ahead, as it says.
	if r := e.Sandbox("land", "lost", "--force"); r.Code != 0 {
		t.Fatalf("land --force: %s", r)
	}
	if got := e.Git("show", "main:top.txt"); got != "landable" {
		t.Errorf("land --force did not land top.txt: %q", got)
	}
	if e.hasSandbox("lost") {
		t.Errorf("land --force left the sandbox")
	}
}

// ---------------------------------------------------------------------------
// 9. Snapshot amplification: a repository's interval = "1s" grew a 16 MB
// worktree's object store by ~150 MB in 15 s, and a 4 GiB sparse file took
// half a minute of host CPU per snapshot with the agent paused.

// atkChurnAgent writes 4 MB of fresh random data 30 times, each write
// meant for a snapshot of its own (120 MB), then says which blob its last
// write is.
const atkChurnAgent = `
set -e
i=0
while [ $i -lt 30 ]; do
	head -c 4000000 /dev/urandom > churn.bin
	i=$((i + 1))
	sleep 0.4
done
echo "ARMED: CHURN"
echo "FINAL: $(git hash-object churn.bin)"
echo AGENT-DONE
`

// atkSparseTrackedAgent tracks a 1 GiB sparse file (a few blocks on disk)
// without reading it: its index entry names the empty blob.
const atkSparseTrackedAgent = `
set -e
truncate -s 1073741824 sparse.bin
git update-index --add --cacheinfo "100644,$(git hash-object -w --stdin </dev/null),sparse.bin"
echo small > small.txt
if git ls-files --error-unmatch sparse.bin >/dev/null && [ "$(du -k sparse.bin | cut -f1)" -lt 1024 ]; then echo "ARMED: SPARSE"; fi
echo AGENT-DONE
`

// dirBytes is the total size of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func TestAttackSnapshotAmplification(t *testing.T) {
	t.Parallel()
	t.Run("repository interval", func(t *testing.T) {
		e := NewEnv(t)
		e.WriteFile(".sandbox.toml", "[rescue]\ninterval = \"1s\"\n")
		e.Git("add", ".sandbox.toml")
		e.Git("commit", "-qm", "snapshot every second")
		r := e.Sandbox("start", "fast", "-d", "--agent", "shell", "--", "sleep", "60")
		if r.Code == 0 {
			t.Errorf("ATTACK SUCCEEDED: a repository set a 1s snapshot interval: %s", r)
		} else if !strings.Contains(r.Stderr, "rescue.interval") || !strings.Contains(r.Stderr, "10s") {
			t.Errorf("no clear refusal of the repository's interval: %s", r)
		}
		// ps refuses the repository's file too: look for what start makes.
		if x := e.Run(e.Repo, nil, "git", "rev-parse", "-q", "--verify", "refs/heads/fast"); x.Code == 0 {
			t.Errorf("a refused start made the branch")
		}
		if _, err := os.Stat(filepath.Join(e.State, e.RepoID(), "fast")); err == nil {
			t.Errorf("a refused start left a sandbox directory")
		}
	})
	t.Run("budget", func(t *testing.T) {
		e := NewEnv(t)
		// The user may snapshot every second; the budget bounds what that
		// writes.
		e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n[budget]\nsnapshots = \"20m\"\n", baseImage)
		objects := filepath.Join(e.Repo, ".git", "objects")
		before := dirBytes(t, objects)
		e.MustSandbox("start", "churn", "-d", "--agent", "shell", "--", "sh", "-c", atkChurnAgent)
		if r := e.Sandbox("wait", "churn", "--timeout", "120s"); r.Code != 0 {
			t.Fatalf("wait: %s", r)
		}
		logs := e.Sandbox("logs", "churn").Stdout
		atkArmed(t, logs, "CHURN")
		grown := dirBytes(t, objects) - before
		t.Logf("the object store grew by %d MiB", grown>>20)
		// 20 MB of budget, the snapshot that crossed it, and the exit
		// snapshot: at most 20 + 2 * 4 MB and some slack for trees.
		if grown > 32<<20 {
			t.Errorf("ATTACK SUCCEEDED: the snapshots grew the object store by %d MiB with a budget of 20 MiB", grown>>20)
		}
		wt := e.Worktree("churn")
		if log := readFile(filepath.Join(filepath.Dir(wt), "supervisor.log")); !strings.Contains(log, "interval snapshots stop") || !strings.Contains(log, "budget.snapshots") {
			t.Errorf("the supervisor does not say the budget stopped its snapshots:\n%s", log)
		}
		// The exit snapshot is still taken, with the agent's last work.
		final := between(logs, "FINAL: ", "\n")
		if got := e.Git("rev-parse", "refs/sandbox/churn/rescue:churn.bin"); final == "" || got != final {
			t.Errorf("the newest snapshot holds churn.bin %s, the agent's last write is %q", got, final)
		}
		var ps []struct {
			Branch string `json:"branch"`
			Spent  bool   `json:"snapshot_budget_spent"`
		}
		must(t, json.Unmarshal([]byte(e.MustSandbox("ps", "--json").Stdout), &ps))
		if len(ps) != 1 || !ps[0].Spent {
			t.Errorf("ps --json does not say the snapshot budget is spent: %+v", ps)
		}
	})
	t.Run("sparse tracked file", func(t *testing.T) {
		e := NewEnv(t)
		r := e.atkStart("sparse", atkSparseTrackedAgent)
		atkArmed(t, r.Stdout, "SPARSE")
		snaps := e.Snapshots("sparse")
		if len(snaps) == 0 {
			t.Fatal("no snapshots")
		}
		if x := e.Run(e.Repo, nil, "git", "cat-file", "-s", snaps[0].ID+":sparse.bin"); x.Code == 0 {
			t.Errorf("ATTACK SUCCEEDED: the host read the sparse file into a snapshot (%s bytes)", strings.TrimSpace(x.Stdout))
		}
		if got := e.Git("show", snaps[0].ID+":small.txt"); got != "small" {
			t.Errorf("the snapshot lacks the agent's other work: %q", got)
		}
		show := e.MustSandbox("rescue", "show", snaps[0].ID)
		if !strings.Contains(show.Stdout+show.Stderr, "sparse.bin") {
			t.Errorf("rescue show does not name the file left out:\n%s", show)
		}
		if d := e.Sandbox("diff", "sparse"); !strings.Contains(d.Stderr, "sparse.bin") {
			t.Errorf("diff does not warn about the file left out:\n%s", d)
		}
	})
}
