package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
)

// engineVar names the directory of a script's fake engine. Only this test
// binary reads it: its git-sandbox (the command, the supervisor it spawns,
// a fleet's runner) then reaches that engine for every engine it connects
// to, once the script has made it with `fakeengine`. A production binary
// has no such variable.
const engineVar = "GIT_SANDBOX_SCRIPT_ENGINE"

// defaultImages are what a script's engine has: the default image with
// the agent CLIs it says it has.
var defaultImages = map[string][]string{"git-sandbox:latest": {"claude", "codex"}}

// installFakeEngine points every engine of this process at the script's
// fake engine, when the script made one.
func installFakeEngine() {
	dir := os.Getenv(engineVar)
	if dir == "" {
		return
	}
	if _, err := os.Stat(dir); err != nil {
		return // no engine: commands that reach for one fail as with no daemon
	}
	holdBusy(dir)
	cliapp.ProxyBinary = func(string) (proxyimage.Binary, error) { return scriptProxyBinary(dir) }
	engines.Override = func(ctx context.Context, name string) (container.Engine, error) {
		d := engineDir(dir, name)
		s, err := fake.OpenShared(d, fake.SharedOptions{Runner: &hostRunner{dir: d}})
		if err != nil {
			return nil, fmt.Errorf("engine %q does not answer: %w", name, err)
		}
		return s, nil
	}
}

// proxyBinaryFile is what the egress proxy's image holds in scripts, in
// the engine's directory: the fake engine acts the proxy out, and the test
// binary, linked dynamically, could not run alone in that image.
const proxyBinaryFile = "proxy-binary"

// proxyBinaryContent is that file's content.
const proxyBinaryContent = "git sandbox's egress proxy, acted out by the scripts' fake engine\n"

// scriptProxyBinary is the binary the proxy's image holds in scripts.
func scriptProxyBinary(dir string) (proxyimage.Binary, error) {
	sum := sha256.Sum256([]byte(proxyBinaryContent))
	return proxyimage.Binary{File: filepath.Join(dir, proxyBinaryFile), SHA256: hex.EncodeToString(sum[:]), Size: int64(len(proxyBinaryContent))}, nil
}

// busyLock is the file every git-sandbox process of a script holds a
// shared lock on while it runs, and settle an exclusive one.
const busyLock = "busy.lock"

// holdBusy takes a shared lock on the script's busy file for as long as
// this process and everything it starts live: the file is opened without
// close-on-exec, so each child (the supervisor it spawns, the git and
// agent processes) holds the same open file, and its lock, from the moment
// it is forked until it exits. settle's exclusive lock is granted only
// once none of them is left, with no window between a spawn and the
// child's own start.
func holdBusy(dir string) {
	fd, err := syscall.Open(filepath.Join(dir, busyLock), syscall.O_CREAT|syscall.O_RDONLY, 0o600)
	if err != nil {
		return
	}
	_ = syscall.Flock(fd, syscall.LOCK_SH) // kept until this process and its children exit
}

// engineDir is where the engine called name keeps its state ("" is the
// environment's).
func engineDir(dir, name string) string {
	if name == "" {
		return dir
	}
	return filepath.Join(dir, "engines", name)
}

// hostRunner runs a fake container's command on this machine, in the
// directory bind-mounted at its working directory, with its environment
// (paths inside the container changed to the directories mounted there),
// under a small shell that writes the exit code to a file when the
// command ends: the run outlives the git-sandbox process that started it,
// and any process reads its end from that file. Each run has a directory
// under the engine's: pid, exit, stdout, stderr.
//
// The proxy of allowlist mode is acted out (it says it listens and runs
// until stopped). Copy mode cannot run here: its workspace is in volumes
// a container's shell scripts reach by their paths inside the container.
type hostRunner struct{ dir string }

// runScript runs the command given after the exit file's path and
// records its code there.
const runScript = `exit_file=$1; shift
"$@"
code=$?
echo "$code" > "$exit_file.tmp" && mv "$exit_file.tmp" "$exit_file"
exit "$code"`

// Start implements fake.Runner.
func (r *hostRunner) Start(c fake.Container, attached *container.Streams) (string, <-chan struct{}, error) {
	run := filepath.Join(r.dir, "runs", fmt.Sprintf("%s-%d", c.ID[len(c.ID)-6:], c.Starts))
	if err := os.MkdirAll(run, 0o700); err != nil {
		return "", nil, err
	}
	if c.Spec.Labels[container.LabelRole] == container.RoleProxy {
		err := os.WriteFile(filepath.Join(run, "stderr"), []byte("git sandbox: proxy listening on :3128\n"), 0o600)
		return run, closed(attached), err
	}
	if len(c.Spec.Argv) == 0 {
		return "", nil, errors.New("the fake engine runs no image's default command")
	}
	dir, env, err := r.place(c.Spec, c.Spec.WorkDir, nil)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", runScript, "fake-container", filepath.Join(run, "exit")}, c.Spec.Argv...)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdout, err := os.Create(filepath.Join(run, "stdout"))
	if err != nil {
		return "", nil, err
	}
	stderr, err := os.Create(filepath.Join(run, "stderr"))
	if err != nil {
		stdout.Close()
		return "", nil, err
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if attached != nil {
		cmd.Stdin = attached.Stdin
		cmd.Stdout = io.MultiWriter(stdout, orDiscard(attached.Stdout))
		cmd.Stderr = io.MultiWriter(stderr, orDiscard(attached.Stderr))
	}
	if err := cmd.Start(); err != nil {
		stdout.Close()
		stderr.Close()
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(run, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		return "", nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // reaps it while this process lives
		stdout.Close()
		stderr.Close()
		close(done)
	}()
	if attached == nil {
		return run, nil, nil
	}
	return run, done, nil
}

// closed is a closed channel when streams are attached (nothing more will
// be written there), else nil.
func closed(attached *container.Streams) <-chan struct{} {
	if attached == nil {
		return nil
	}
	c := make(chan struct{})
	close(c)
	return c
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Exited implements fake.Runner.
func (r *hostRunner) Exited(run string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(run, "exit"))
	if err != nil {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return code, true
}

// Stop implements fake.Runner: the run's whole process group is killed.
func (r *hostRunner) Stop(run string) {
	b, err := os.ReadFile(filepath.Join(run, "pid"))
	if err != nil {
		return // acted out: nothing runs
	}
	if pid, err := strconv.Atoi(string(b)); err == nil && pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// Logs implements fake.Runner.
func (r *hostRunner) Logs(run string, stdout, stderr io.Writer) {
	for name, w := range map[string]io.Writer{"stdout": stdout, "stderr": stderr} {
		if b, err := os.ReadFile(filepath.Join(run, name)); err == nil {
			_, _ = w.Write(b)
		}
	}
}

// Exec implements fake.Runner: the command runs to its end here.
func (r *hostRunner) Exec(ctx context.Context, c fake.Container, o container.ExecOptions) (int, error) {
	dir := o.WorkDir
	if dir == "" {
		dir = c.Spec.WorkDir
	}
	if len(o.Argv) == 0 {
		return -1, errors.New("exec: no command")
	}
	hostDir, env, err := r.place(c.Spec, dir, o.Env)
	if err != nil {
		return -1, err
	}
	cmd := exec.CommandContext(ctx, o.Argv[0], o.Argv[1:]...)
	cmd.Dir, cmd.Env = hostDir, env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Streams.Stdin, o.Streams.Stdout, o.Streams.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Start()
	if o.Started != nil {
		o.Started()
	}
	if err != nil {
		return 127, nil
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), nil
	case err != nil:
		return -1, err
	}
	return 0, nil
}

// place is where a command of the container runs on this machine: the
// directory mounted at its working directory dir, and the container's
// environment with extra, paths inside the container changed to the
// directories mounted there.
func (r *hostRunner) place(spec container.Spec, dir string, extra []string) (string, []string, error) {
	mounts := r.mounts(spec)
	hostDir, ok := hostPath(mounts, dir)
	if !ok {
		return "", nil, fmt.Errorf("the fake engine runs a container's command on this machine only in a directory mounted into it, not in %s", dir)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1"}
	for _, k := range []string{"LANG", "GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v) // the script's fixed dates: commit ids stay the same
		}
	}
	for _, kv := range append(slices.Clone(spec.Env), extra...) {
		k, v, _ := strings.Cut(kv, "=")
		if p, ok := hostPath(mounts, v); ok && path.IsAbs(v) {
			v = p
		}
		env = append(env, k+"="+v)
	}
	// The worktree's .git is a gitfile mounted over the host's: git on
	// this machine is pointed at the agent's repository the same way.
	for _, m := range mounts {
		if path.Base(m.Target) != ".git" || m.Volume {
			continue
		}
		b, err := os.ReadFile(m.Source)
		if gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: "); err == nil && ok {
			if g, ok := hostPath(mounts, gitdir); ok {
				wt, _ := hostPath(mounts, path.Dir(m.Target))
				env = append(env, "GIT_DIR="+g, "GIT_WORK_TREE="+wt)
			}
		}
	}
	return hostDir, env, nil
}

// mounts are the spec's mounts with volumes turned into directories of
// the engine's.
func (r *hostRunner) mounts(spec container.Spec) []container.Mount {
	out := slices.Clone(spec.Mounts)
	for i, m := range out {
		if m.Volume {
			out[i].Source = filepath.Join(r.dir, "volumes", m.Source)
			_ = os.MkdirAll(out[i].Source, 0o700)
		}
	}
	return out
}

// hostPath is where a path inside the container is on this machine: under
// the mount with the longest target that holds it.
func hostPath(mounts []container.Mount, p string) (string, bool) {
	if !path.IsAbs(p) {
		return "", false
	}
	best := -1
	for i, m := range mounts {
		if (p == m.Target || strings.HasPrefix(p, strings.TrimSuffix(m.Target, "/")+"/")) && (best < 0 || len(m.Target) > len(mounts[best].Target)) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	m := mounts[best]
	return filepath.Join(m.Source, strings.TrimPrefix(p, m.Target)), true
}

// cmdFakeEngine makes the script's fake engine, or changes or shows it.
//
//	fakeengine                      make it, with the default image
//	fakeengine image REF [AGENT…]   add an image
//	fakeengine fail METHOD MESSAGE  fail every call of METHOD (failonce: the next)
//	fakeengine ps                   print its containers, networks and volumes
//
// With -engine NAME first, each is about the engine the user's config
// calls NAME instead of the environment's.
func cmdFakeEngine(ts *testscript.TestScript, neg bool, args []string) {
	const usage = "usage: fakeengine [-engine NAME] [image REF [AGENT...] | fail|failonce METHOD MESSAGE | ps]"
	if neg {
		ts.Fatalf(usage)
	}
	dir := ts.Getenv(engineVar)
	if len(args) >= 2 && args[0] == "-engine" {
		if _, err := os.Stat(dir); err != nil {
			ts.Fatalf("fakeengine: make the environment's engine first")
		}
		dir, args = engineDir(dir, args[1]), args[2:]
	}
	if len(args) == 0 {
		ts.Check(fake.InitShared(dir, defaultImages))
		ts.Check(os.WriteFile(filepath.Join(ts.Getenv(engineVar), proxyBinaryFile), []byte(proxyBinaryContent), 0o755))
		return
	}
	s, err := fake.OpenShared(dir, fake.SharedOptions{})
	ts.Check(err)
	switch {
	case args[0] == "image" && len(args) >= 2:
		ts.Check(s.AddImage(args[1], args[2:]...))
	case (args[0] == "fail" || args[0] == "failonce") && len(args) == 3:
		ts.Check(s.Fail(args[1], args[2], args[0] == "failonce"))
	case args[0] == "ps" && len(args) == 1:
		f, err := s.Engine()
		ts.Check(err)
		ts.Stdout().Write([]byte(describeEngine(f)))
	default:
		ts.Fatalf(usage)
	}
}

// describeEngine lists what an engine holds, one line each, sorted:
// "container NAME ROLE STATUS CODE", "network NAME", "volume NAME".
func describeEngine(f *fake.Engine) string {
	var lines []string
	for _, c := range f.Containers() {
		lines = append(lines, fmt.Sprintf("container %s %s %s %d", c.Name, c.Spec.Labels[container.LabelRole], c.Status, c.ExitCode))
	}
	nets, _ := f.ListNetworks(context.Background())
	for _, n := range nets {
		lines = append(lines, "network "+n.Name)
	}
	vols, _ := f.ListVolumes(context.Background())
	for _, v := range vols {
		lines = append(lines, "volume "+v.Name)
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// cmdSettle waits until the script's git-sandbox processes and
// everything they started (a supervisor, a fleet's runner and its agents,
// a purge) have ended, so what they write is there before the next
// command looks: it takes the busy file's lock exclusively (holdBusy).
//
//	settle
func cmdSettle(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: settle")
	}
	dir := ts.Getenv(engineVar)
	fh, err := os.OpenFile(filepath.Join(dir, busyLock), os.O_CREATE|os.O_RDONLY, 0o600)
	ts.Check(err)
	defer fh.Close()
	locked := make(chan error, 1)
	go func() { locked <- syscall.Flock(int(fh.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-locked:
		ts.Check(err)
		_ = syscall.Flock(int(fh.Fd()), syscall.LOCK_UN)
	case <-time.After(2 * time.Minute):
		ts.Fatalf("settle: still running after 2 minutes: %s", strings.Join(scriptProcesses(engineVar+"="+dir), "; "))
	}
	checkBackgroundLogs(ts)
}

// checkBackgroundLogs fails the script when a background process's log
// (a supervisor's, a fleet runner's) shows a data race or a panic: their
// output goes nowhere a command's exit status would show it.
func checkBackgroundLogs(ts *testscript.TestScript) {
	root := filepath.Join(ts.Getenv("XDG_STATE_HOME"), "git-sandbox")
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		for _, bad := range []string{"WARNING: DATA RACE", "panic: "} {
			if strings.Contains(string(b), bad) {
				ts.Fatalf("settle: %s shows %q:\n%s", p, bad, b)
			}
		}
		return nil
	})
}

// scriptProcesses are the command lines of the git-sandbox processes
// whose environment holds want (zombies have none). The command line is
// read first: it is short, and most processes are not git-sandbox.
func scriptProcesses(want string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0]) != "git-sandbox" {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), want) {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(strings.TrimSpace(string(cmdline)), "\x00", " ")))
	}
	return out
}

// killLeftovers ends what a script left running: its background
// git-sandbox processes and the runs of its engines' containers.
func killLeftovers(want, dir string) {
	for _, p := range scriptProcesses(want) {
		if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	more, _ := filepath.Glob(filepath.Join(dir, "engines", "*", "runs", "*"))
	for _, run := range append(runs, more...) {
		if _, err := os.Stat(filepath.Join(run, "exit")); err == nil {
			continue
		}
		(&hostRunner{}).Stop(run)
	}
}
