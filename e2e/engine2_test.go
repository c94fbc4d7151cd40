package e2e

// A second, real Docker engine for the tests of remote engines (copy mode)
// and gVisor: e2e/engine2/engine.sh starts Debian's dockerd with its own
// config, socket, data-root, exec-root (so its own containerd), pidfile,
// trust key, cgroup parent and bridge, runsc registered, in its own mount
// namespace where the temporary directories and homes are empty, so that
// it sees none of the client's files, as a remote engine would.
//
// Tests get its DOCKER_HOST from startEngine2 (one engine per test binary,
// started on first use, stopped at the end of the run), the environment
// for reaching it over TCP with mutual TLS from startEngine2TLS, or a
// private engine from newEngine2 (stopped when the test ends). Env.UseEngine
// points a test's git sandbox commands at it. It needs root: outside CI
// without root those tests skip and the run says so at the end; under
// CI=true they fail.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// engine2 is one running second engine.
type engine2 struct {
	Dir      string // its directory: socket, data-root, exec-root, config, log
	Host     string // its DOCKER_HOST, unix://Dir/docker.sock
	TLSHost  string // tcp://127.0.0.1:PORT with mutual TLS, when asked for
	CertPath string // the client's ca.pem, cert.pem, key.pem for TLSHost
	Bridge   string // the bridge made for it
}

// env is the environment that points the docker CLI or SDK at the engine:
// over its unix socket, or over TCP with TLS.
func (g *engine2) env(tls bool) []string {
	if tls {
		return []string{"DOCKER_HOST=" + g.TLSHost, "DOCKER_TLS_VERIFY=1", "DOCKER_CERT_PATH=" + g.CertPath}
	}
	return []string{"DOCKER_HOST=" + g.Host}
}

var shared2 struct {
	wanted  atomic.Bool // a test asked for a second engine
	once    sync.Once
	eng     *engine2
	err     error  // why it failed to start
	skip    string // why it cannot run here (outside CI only)
	elapsed time.Duration
}

// engine2Script is the script that starts and stops the engine.
func engine2Script() string { return filepath.Join(repoRoot, "e2e", "engine2", "engine.sh") }

// engine2Unavailable says why no second engine can run here, or "".
func engine2Unavailable() string {
	if os.Geteuid() != 0 {
		return "they need root (a bridge made with ip link, a second dockerd)"
	}
	for _, bin := range []string{"dockerd", "ip", "unshare", "flock"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " is not installed"
		}
	}
	return ""
}

// requireEngine2 fails the test under CI and skips it otherwise when no
// second engine can run here.
func requireEngine2(t testing.TB) {
	t.Helper()
	shared2.wanted.Store(true)
	why := engine2Unavailable()
	if why == "" {
		return
	}
	notRunHere(t, "the second Docker engine cannot run here: "+why, "make engine2 says what it needs")
}

// startEngine2 returns the DOCKER_HOST of the shared second engine, with the
// test base image loaded, starting it on first use.
func startEngine2(t testing.TB) string {
	t.Helper()
	return sharedEngine2(t).Host
}

// startEngine2TLS returns the environment that reaches the shared second
// engine over TCP with mutual TLS (DOCKER_HOST, DOCKER_TLS_VERIFY,
// DOCKER_CERT_PATH), starting it on first use.
func startEngine2TLS(t testing.TB) []string {
	t.Helper()
	return sharedEngine2(t).env(true)
}

func sharedEngine2(t testing.TB) *engine2 {
	t.Helper()
	requireEngine2(t)
	shared2.once.Do(func() {
		dir, err := engine2Dir()
		if err != nil {
			shared2.err = err
			return
		}
		began := time.Now()
		shared2.eng, shared2.err = runEngine2Start(dir, true, baseImage)
		shared2.elapsed = time.Since(began)
		if shared2.err == nil {
			fmt.Fprintf(os.Stderr, "e2e: second engine up at %s in %s\n", shared2.eng.Host, shared2.elapsed.Round(10*time.Millisecond))
		}
	})
	if shared2.err != nil {
		t.Fatalf("start the second Docker engine: %v", shared2.err)
	}
	return shared2.eng
}

// stopEngine2 stops the shared engine, if it was started, and says when the
// second-engine tests did not run. runMain calls it after the tests.
func stopEngine2() {
	if why := engine2Unavailable(); why != "" && shared2.wanted.Load() {
		fmt.Fprintf(os.Stderr, "e2e: NOTE: the second-engine (remote engine, gVisor) tests did NOT run: %s\n", why)
		return
	}
	if shared2.eng == nil {
		return
	}
	began := time.Now()
	if err := runEngine2(nil, "stop", shared2.eng.Dir); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: stop the second engine: %v\n", err)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: second engine stopped in %s\n", time.Since(began).Round(10*time.Millisecond))
	shared2.eng = nil
}

// newEngine2 starts a private second engine for one test, with images
// copied from the main daemon, and stops it when the test ends.
func newEngine2(t testing.TB, images ...string) *engine2 {
	t.Helper()
	requireEngine2(t)
	dir, err := engine2Dir()
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	eng, err := runEngine2Start(dir, false, images...)
	if err != nil {
		t.Fatalf("start a second Docker engine: %v", err)
	}
	t.Logf("second engine %s started in %s", eng.Host, time.Since(began).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if _, err := os.Stat(eng.Dir); err == nil {
			_ = runEngine2(nil, "stop", eng.Dir)
		}
	})
	return eng
}

// engine2Dir makes a fresh directory for an engine: short, since the
// engine's containerd socket lives under it (unix socket paths are short).
func engine2Dir() (string, error) {
	parent := os.TempDir()
	if len(parent) > 40 {
		parent = "/tmp"
	}
	return os.MkdirTemp(parent, "gse2-")
}

// runEngine2Start starts an engine in dir with images copied from the main
// daemon, and also on a TCP port with TLS when tls is set.
func runEngine2Start(dir string, tls bool, images ...string) (*engine2, error) {
	var out bytes.Buffer
	env := []string{"ENGINE2_IMAGES=" + strings.Join(images, " "), fmt.Sprintf("ENGINE2_OWNER_PID=%d", os.Getpid())}
	if tls {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		env = append(env, fmt.Sprintf("ENGINE2_TLS_PORT=%d", port))
	}
	if err := runEngine2(&out, "start", dir, env...); err != nil {
		// Whatever it made before it failed (its directory, a bridge).
		_ = runEngine2(nil, "stop", dir)
		return nil, err
	}
	eng := &engine2{Dir: dir}
	for _, line := range strings.Split(out.String(), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "DOCKER_HOST":
			eng.Host = v
		case "DOCKER_HOST_TLS":
			eng.TLSHost = v
		case "DOCKER_CERT_PATH":
			eng.CertPath = v
		}
	}
	if eng.Host == "" || tls && (eng.TLSHost == "" || eng.CertPath == "") {
		return nil, fmt.Errorf("engine.sh start did not print where the engine listens:\n%s", out.String())
	}
	eng.Bridge = engine2State(dir)["BRIDGE"]
	return eng, nil
}

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// runEngine2 runs engine.sh CMD DIR; stdout goes to out when given.
func runEngine2(out *bytes.Buffer, cmd, dir string, env ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, engine2Script(), cmd, dir)
	c.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = out, &stderr
	if out == nil {
		c.Stdout = &stderr
	}
	if err := c.Run(); err != nil {
		return fmt.Errorf("engine.sh %s: %v\n%s", cmd, err, stderr.String())
	}
	return nil
}

// engine2State reads the KEY=value lines engine.sh keeps in DIR/engine.env.
func engine2State(dir string) map[string]string {
	st := map[string]string{}
	f, err := os.Open(filepath.Join(dir, "engine.env"))
	if err != nil {
		return st
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			st[k] = v
		}
	}
	return st
}

// dockerAt runs the docker CLI against an engine (a DOCKER_HOST, or the
// main daemon for "") and returns its trimmed stdout; it fails the test on
// error.
func dockerAt(t testing.TB, host string, args ...string) string {
	t.Helper()
	return dockerEnv(t, hostEnv(host), args...)
}

func dockerAtErr(host string, args ...string) (string, error) {
	return dockerEnvErr(hostEnv(host), args...)
}

func hostEnv(host string) []string {
	if host == "" {
		return nil
	}
	return []string{"DOCKER_HOST=" + host}
}

// dockerEnv runs the docker CLI with env added (DOCKER_HOST and the like)
// and returns its trimmed stdout; it fails the test on error.
func dockerEnv(t testing.TB, env []string, args ...string) string {
	t.Helper()
	out, err := dockerEnvErr(env, args...)
	if err != nil {
		t.Fatalf("docker %s (%s): %v", strings.Join(args, " "), strings.Join(env, " "), err)
	}
	return out
}

func dockerEnvErr(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "docker", args...)
	c.Env = os.Environ()
	if len(env) > 0 {
		c.Env = append(dockerFreeEnv(c.Env), env...)
	}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return strings.TrimSpace(stdout.String()), fmt.Errorf("%v\n%s%s", err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// dockerFreeEnv is env without the variables that choose a Docker engine.
func dockerFreeEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(v string) bool {
		k, _, _ := strings.Cut(v, "=")
		return k == "DOCKER_HOST" || k == "DOCKER_TLS_VERIFY" || k == "DOCKER_CERT_PATH" || k == "DOCKER_CONTEXT"
	})
}

// UseEngine points the test's git sandbox commands at another engine:
// vars are "DOCKER_HOST=" + startEngine2(t), or startEngine2TLS(t).
func (e *Env) UseEngine(vars ...string) {
	e.vars = append(dockerFreeEnv(e.vars), vars...)
}

func TestEngine2RunsContainersOfItsOwn(t *testing.T) {
	host := startEngine2(t)
	if got := dockerAt(t, host, "run", "--rm", "--network", "none", baseImage, "echo", "hello from engine2"); got != "hello from engine2" {
		t.Fatalf("container output %q, want %q", got, "hello from engine2")
	}
	// Its own engine: its own ID (trust key), data-root and containers.
	mainID := dockerAt(t, "", "info", "--format", "{{.ID}}")
	info := strings.Fields(dockerAt(t, host, "info", "--format", "{{.ID}} {{.DockerRootDir}}"))
	if len(info) != 2 {
		t.Fatalf("docker info: %q", info)
	}
	if info[0] == mainID {
		t.Errorf("the second engine reports the main daemon's ID %s", mainID)
	}
	if want := filepath.Join(shared2.eng.Dir, "data"); info[1] != want {
		t.Errorf("the second engine's data-root is %s, want %s", info[1], want)
	}
	name := fmt.Sprintf("gse2-probe-%d", time.Now().UnixNano())
	dockerAt(t, host, "create", "--name", name, "--network", "none", baseImage, "true")
	defer dockerAt(t, host, "rm", "-f", name)
	if _, err := dockerAtErr("", "container", "inspect", name); err == nil {
		t.Errorf("a container created on the second engine shows on the main daemon")
	}
}

func TestEngine2ServesTLSOverTCP(t *testing.T) {
	env := startEngine2TLS(t)
	if got := dockerEnv(t, env, "run", "--rm", "--network", "none", baseImage, "echo", "over tls"); got != "over tls" {
		t.Fatalf("container output %q, want %q", got, "over tls")
	}
	if got, want := dockerEnv(t, env, "info", "--format", "{{.ID}}"), dockerAt(t, startEngine2(t), "info", "--format", "{{.ID}}"); got != want {
		t.Errorf("TCP reaches engine %s, the socket %s", got, want)
	}
	// Without the client certificate the engine answers nothing.
	if out, err := dockerEnvErr(env[:1], "version", "--format", "{{.Server.Version}}"); err == nil {
		t.Errorf("the engine answered a client without TLS: %q", out)
	}
}

// git sandbox itself (the Docker SDK, configured from the environment)
// reaches the second engine over its socket and over TCP with TLS: doctor
// finds the engine there, without the sandbox image the main daemon has.
func TestEngine2GitSandboxReachesIt(t *testing.T) {
	e := NewEnv(t)
	main := e.Sandbox("doctor")
	if !strings.Contains(main.Stdout, "ok   docker") || strings.Contains(main.Stdout, testImage+" is missing") {
		t.Fatalf("doctor against the main daemon (which has %s):\n%s", testImage, main)
	}
	for _, vars := range [][]string{{"DOCKER_HOST=" + startEngine2(t)}, startEngine2TLS(t)} {
		e.UseEngine(vars...)
		r := e.Sandbox("doctor")
		if !strings.Contains(r.Stdout, "ok   docker: engine") {
			t.Errorf("doctor with %v finds no engine:\n%s", vars, r)
		}
		if !strings.Contains(r.Stdout, testImage+" is missing") {
			t.Errorf("doctor with %v does not look at the second engine (its image %s is not there):\n%s", vars, testImage, r)
		}
	}
}

func TestEngine2RunsGVisor(t *testing.T) {
	host := startEngine2(t)
	requireRunsc(t, host)
	var uts syscall.Utsname
	must(t, syscall.Uname(&uts))
	hostRelease := utsString(uts.Release[:])

	// runc, the control: the host's kernel.
	if got := dockerAt(t, host, "run", "--rm", "--network", "none", baseImage, "uname", "-r"); got != hostRelease {
		t.Fatalf("runc container reports kernel %q, want the host's %q", got, hostRelease)
	}
	// runsc, hardened as git sandbox runs its containers: gVisor's own
	// kernel, which says so in its log.
	out := dockerAt(t, host, "run", "--rm", "--runtime", "runsc", "--network", "none",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--init", "--pids-limit", "256",
		"--memory", "1g", "--user", "1000:1000", baseImage, "sh", "-c", "uname -r; id -u; dmesg")
	lines := strings.Split(out, "\n")
	if len(lines) < 3 {
		t.Fatalf("runsc container output:\n%s", out)
	}
	if lines[0] == hostRelease {
		t.Errorf("runsc container reports the host's kernel %q", lines[0])
	}
	if lines[1] != "1000" {
		t.Errorf("runsc container runs as uid %q, want 1000", lines[1])
	}
	if !strings.Contains(out, "Starting gVisor") {
		t.Errorf("runsc container's dmesg does not say gVisor:\n%s", out)
	}
}

func utsString(b []int8) string {
	var s []byte
	for _, c := range b {
		if c == 0 {
			break
		}
		s = append(s, byte(c))
	}
	return string(s)
}

func TestEngine2SeesNoClientFiles(t *testing.T) {
	host := startEngine2(t)
	dir := filepath.Join(t.TempDir(), "client")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "client-file"), []byte("only on the client\n"), 0o644))
	// The control: the main daemon shares this machine's files.
	if got := dockerAt(t, "", "run", "--rm", "--network", "none", "-v", dir+":/x:ro", baseImage, "ls", "-A", "/x"); got != "client-file" {
		t.Fatalf("the main daemon sees %q in the bind mount, want client-file", got)
	}
	// The second engine does not: a bind mount of a client path finds an
	// empty directory there (docker -v creates a missing source).
	got, err := dockerAtErr(host, "run", "--rm", "--network", "none", "-v", dir+":/x:ro", baseImage, "ls", "-A", "/x")
	if (err == nil && got != "") || strings.Contains(got, "client-file") {
		t.Fatalf("the second engine sees the client's files: %q (%v)", got, err)
	}
}

func TestEngine2StopLeavesTheMainDaemonAlone(t *testing.T) {
	requireEngine2(t)
	// A container of the main daemon on its default bridge (docker0).
	witness := fmt.Sprintf("gse2-witness-%d", time.Now().UnixNano())
	dockerAt(t, "", "run", "-d", "--init", "--name", witness, baseImage, "sleep", "600")
	t.Cleanup(func() { _, _ = dockerAtErr("", "rm", "-f", witness) })
	before := mainDaemonState(t, witness)
	procs := daemonProcs()

	eng := newEngine2(t, baseImage)
	// Idempotent start; status answers.
	var out bytes.Buffer
	must(t, runEngine2(&out, "start", eng.Dir, "ENGINE2_IMAGES="+baseImage))
	if !strings.Contains(out.String(), "DOCKER_HOST="+eng.Host) {
		t.Fatalf("second start printed %q, want DOCKER_HOST=%s", out.String(), eng.Host)
	}
	must(t, runEngine2(nil, "status", eng.Dir))
	if eng.Bridge == "" {
		t.Fatalf("engine.env names no bridge")
	}
	if _, err := net.InterfaceByName(eng.Bridge); err != nil {
		t.Fatalf("the engine's bridge %s: %v", eng.Bridge, err)
	}
	// Running containers when it stops: runc on its bridge, and runsc.
	dockerAt(t, eng.Host, "run", "-d", "--init", baseImage, "sleep", "600")
	if strings.Contains(dockerAt(t, eng.Host, "info", "--format", "{{json .Runtimes}}"), `"runsc"`) {
		dockerAt(t, eng.Host, "run", "-d", "--runtime", "runsc", "--network", "none", baseImage, "sleep", "600")
	}

	began := time.Now()
	must(t, runEngine2(nil, "stop", eng.Dir))
	t.Logf("second engine stopped in %s", time.Since(began).Round(10*time.Millisecond))

	// Nothing of it is left.
	if _, err := os.Stat(eng.Dir); !os.IsNotExist(err) {
		t.Errorf("the engine's directory is still there: %v", err)
	}
	if _, err := net.InterfaceByName(eng.Bridge); err == nil {
		t.Errorf("the engine's bridge %s is still there", eng.Bridge)
	}
	if left := procsNaming(eng.Dir + "/"); len(left) > 0 {
		t.Errorf("processes of the engine outlived it: %q", left)
	}
	if mi := readFile("/proc/self/mountinfo"); strings.Contains(mi, eng.Dir) {
		t.Errorf("mounts under the engine's directory are left:\n%s", mi)
	}
	if err := runEngine2(nil, "status", eng.Dir); err == nil {
		t.Errorf("status says a stopped engine runs")
	}
	must(t, runEngine2(nil, "stop", eng.Dir)) // idempotent

	// The main daemon, its containerd, docker0 and its container are as they were.
	if after := mainDaemonState(t, witness); !maps.Equal(before, after) {
		t.Errorf("the main daemon changed:\nbefore %q\nafter  %q", before, after)
	}
	for pid, cmdline := range procs {
		if got := readFile(fmt.Sprintf("/proc/%d/cmdline", pid)); got != cmdline {
			t.Errorf("main daemon process %d (%q) is gone or changed", pid, strings.ReplaceAll(cmdline, "\x00", " "))
		}
	}
	if got := dockerAt(t, "", "exec", witness, "cat", "/sys/class/net/eth0/operstate"); got != "up" {
		t.Errorf("the main daemon's container's network is %q, want up", got)
	}
	if got := dockerAt(t, "", "run", "--rm", "--network", "none", baseImage, "echo", "ok"); got != "ok" {
		t.Errorf("the main daemon runs no new container: %q", got)
	}
}

// mainDaemonState is what the second engine must not change of the main
// daemon: its identity, its runtimes, docker0 and a running container.
func mainDaemonState(t testing.TB, witness string) map[string]string {
	t.Helper()
	st := map[string]string{
		"info":    dockerAt(t, "", "info", "--format", "{{.ID}} {{.DockerRootDir}} {{.Driver}} {{.ContainerdCommit.ID}}"),
		"witness": dockerAt(t, "", "inspect", "--format", "{{.State.Running}} {{.State.Pid}} {{.State.StartedAt}} {{.RestartCount}} {{.NetworkSettings.IPAddress}}", witness),
	}
	rts := strings.Fields(dockerAt(t, "", "info", "--format", "{{range $k, $v := .Runtimes}}{{$k}} {{end}}"))
	slices.Sort(rts)
	st["runtimes"] = strings.Join(rts, " ")
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		st["docker0"] = "absent"
		return st
	}
	addrs, _ := ifc.Addrs()
	var as []string
	for _, a := range addrs {
		as = append(as, a.String())
	}
	slices.Sort(as)
	st["docker0"] = fmt.Sprintf("index %d mac %s addrs %v", ifc.Index, ifc.HardwareAddr, as)
	return st
}

// daemonProcs lists the dockerd and containerd processes running now, but
// those of second engines (their directories are named gse2-*), by pid, with
// their command lines.
func daemonProcs() map[int]string {
	procs := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmdline := readFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		argv0 := filepath.Base(strings.SplitN(cmdline, "\x00", 2)[0])
		if (argv0 == "dockerd" || argv0 == "containerd") && !strings.Contains(cmdline, "gse2-") {
			procs[pid] = cmdline
		}
	}
	return procs
}

// procsNaming lists the processes whose command line contains s.
func procsNaming(s string) []string {
	var found []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			found = append(found, e.Name()+" "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return found
}
