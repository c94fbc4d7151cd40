// Package e2e runs the real git-sandbox binary against real git
// repositories and a real Docker daemon. Nothing here is mocked: every
// sandbox is a real container started from an image built offline from a
// debootstrap base (see testimage/build.sh).
//
// Without a reachable Docker daemon the suite fails, always: a skipped
// suite must never look like a passing one. `make test-unit` runs
// everything else.
//
// The suite never builds, tags or removes a user's images: its sandbox
// image has a tag of its own for each run (the binary is told through
// GIT_SANDBOX_DEFAULT_IMAGE, so even the default-image paths use it), and
// the suite fails if git-sandbox:latest is not exactly as it found it.
package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/worktree"
)

var (
	// binDir holds the git-sandbox binary built for this run.
	binDir string
	// testImage is the sandbox image every test uses: this run's own tag,
	// also the binary's default image (GIT_SANDBOX_DEFAULT_IMAGE).
	testImage = fmt.Sprintf("git-sandbox-test:e2e-%d", os.Getpid())
	// baseImage is the offline base it is built from.
	baseImage = envOr("GIT_SANDBOX_TEST_BASE_IMAGE", "git-sandbox-test-base:bookworm")
	// repoRoot is the project's source tree.
	repoRoot string
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// TestMain runs the suite. A run started under nohup ignores SIGHUP, and
// every process it starts would inherit that (an ignored signal stays
// ignored across exec, and git sandbox keeps a signal it was started
// ignoring ignored): the tests that hang up on a git sandbox they started
// need it started as from a terminal. A handler of this process's own
// (caught, not ignored) is reset to the default in each child.
func TestMain(m *testing.M) {
	if signal.Ignored(syscall.SIGHUP) {
		signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
	}
	os.Exit(runMain(m))
}

// sharedEgressNetwork is internal/sandbox.SharedEgressNetwork.
const sharedEgressNetwork = "git-sandbox-egress"

func runMain(m *testing.M) int {
	flag.Parse()
	if err := exec.Command("docker", "info").Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: the Docker daemon is unreachable (%v)\n", err)
		fmt.Fprintln(os.Stderr, "e2e: these tests need a real daemon; start one (.ci/run does) and run make test, or make test-unit for the rest")
		return 1
	}
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Dir(filepath.Dir(file))
	startClusterBuild()
	defer stopClusterBuild()
	tmp, err := os.MkdirTemp("", "git-sandbox-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// World-readable, so the non-root test user can run the binary.
	_ = os.Chmod(tmp, 0o755)
	binDir = tmp
	// Static (as make build makes it): the same file runs as a sandbox's
	// egress proxy inside the sandbox's image. The test upstream server
	// and the DNS witness run in containers the same way.
	for _, b := range [][2]string{{"git-sandbox", "./cmd/git-sandbox"}, {"test-upstream", "./e2e/testupstream"}, {"dnswatch", "./e2e/dnswatch"}} {
		build := exec.Command("go", "build", "-o", filepath.Join(binDir, b[0]), b[1])
		build.Dir = repoRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: build %s: %v\n", b[0], err)
			return 1
		}
	}
	userImage := imageID(userDefaultImage)
	// The egress proxy's images this run makes carry the binary's hash;
	// those there before (another run of the same source) are not ours.
	proxyBefore := proxyImagesOfThisBinary()
	defer removeProxyImages(proxyBefore)
	if err := ensureImages(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: %v\n", err)
		removeImages()
		return 1
	}
	// The engine's shared egress network is git sandbox's, made by the
	// first allowlist start; the suite removes it again only if it made it
	// (a user's sandboxes may be using one that was there before).
	hadEgress := exec.Command("docker", "network", "inspect", sharedEgressNetwork).Run() == nil
	code := m.Run()
	removeHistories()
	stopClusterBuild()
	cleanupLeftovers()
	if !hadEgress {
		_ = exec.Command("docker", "network", "rm", sharedEgressNetwork).Run()
	}
	stopEngine2()
	if err := stopCluster(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: %v\n", err)
		code = 1
	}
	removeImages()
	if after := imageID(userDefaultImage); after != userImage {
		fmt.Fprintf(os.Stderr, "e2e: FAIL: the suite changed the user's %s (image %q before, %q after)\n", userDefaultImage, userImage, after)
		code = 1
	}
	return code
}

// userDefaultImage is the image a user's git sandbox builds and runs by
// default. Nothing in the suite may build, tag, rename or remove it.
const userDefaultImage = "git-sandbox:latest"

// imageID returns the id of an image, or "" when it is absent.
func imageID(ref string) string {
	out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// proxyImagesOfThisBinary lists the egress proxy images (git sandbox's
// own: label git-sandbox.proxy) whose tag ends in the hash of the binary
// under test, as git sandbox tags them (version-<12 hex of its sha256>).
func proxyImagesOfThisBinary() map[string]bool {
	data, err := os.ReadFile(filepath.Join(binDir, "git-sandbox"))
	if err != nil {
		return nil
	}
	sum := sha256.Sum256(data)
	suffix := "-" + hex.EncodeToString(sum[:])[:12]
	out, _ := exec.Command("docker", "images", "--filter", "label=git-sandbox.proxy=1", "--format", "{{.Repository}}:{{.Tag}}").Output()
	tags := map[string]bool{}
	for _, tag := range strings.Fields(string(out)) {
		if strings.HasPrefix(tag, "git-sandbox-proxy:") && strings.HasSuffix(tag, suffix) {
			tags[tag] = true
		}
	}
	return tags
}

// removeProxyImages removes the proxy images of the binary under test
// that were not there before the run (before).
func removeProxyImages(before map[string]bool) {
	for tag := range proxyImagesOfThisBinary() {
		if !before[tag] {
			_ = exec.Command("docker", "rmi", tag).Run()
		}
	}
}

// proxyImageOnce makes the egress proxy's image of the binary under test
// on the main daemon (git sandbox image proxy), once a run.
var proxyImageOnce = sync.OnceValues(func() (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "image", "proxy")
	home, err := os.MkdirTemp("", "git-sandbox-e2e-proxy-image-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(home)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config")}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		cmd.Env = append(cmd.Env, "DOCKER_HOST="+h)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git sandbox image proxy: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
})

// proxyImage is the tag of the egress proxy's image of the binary under
// test, made on the main daemon if it is not there.
func proxyImage(t testing.TB) string {
	t.Helper()
	tag, err := proxyImageOnce()
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

// testImages are the tags this run built; removeImages removes them.
var testImages sync.Map

// ownImage records a tag this run builds, for removal at the end.
func ownImage(tag string) string {
	testImages.Store(tag, true)
	return tag
}

func removeImages() {
	testImages.Range(func(k, _ any) bool {
		_ = exec.Command("docker", "rmi", k.(string)).Run()
		return true
	})
}

// ensureImages builds the offline base (once, cached by tag), the
// sandbox image from it with the binary under test (cached by Docker's
// build cache), and that binary's egress proxy image.
func ensureImages() error {
	if err := exec.Command("docker", "image", "inspect", baseImage).Run(); err != nil {
		cmd := exec.Command(filepath.Join(repoRoot, "e2e", "testimage", "build.sh"), baseImage)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("build the test base image: %v", err)
		}
	}
	cmd := exec.Command(filepath.Join(binDir, "git-sandbox"), "image", "build", "--base", baseImage, "--tag", ownImage(testImage), "--no-agents")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git sandbox image build: %v\n%s", err, out.String())
	}
	// The egress proxy's image too, which the first allowlist start would
	// make (saying so on stderr, in whichever test came first).
	_, err := proxyImageOnce()
	return err
}

// createdRepos holds the repository id of every test repository; the
// containers labelled with one of them are this run's, and what
// cleanupLeftovers removes.
var createdRepos sync.Map

func cleanupLeftovers() {
	createdRepos.Range(func(k, _ any) bool {
		removeContainers(k.(string))
		return true
	})
}

func removeContainers(repoID string) { removeContainersAt("", repoID) }

// removeContainersAt removes what git sandbox made for a test repository
// on the engine at host ("": the default one): its containers, networks
// and volumes (copy mode's worktree, repositories, home, the proxy's).
func removeContainersAt(host, repoID string) {
	filter := "label=git-sandbox.repo=" + repoID
	for _, kind := range [][2][]string{
		{{"ps", "-aq"}, {"rm", "-f"}},
		{{"network", "ls", "-q"}, {"network", "rm"}},
		{{"volume", "ls", "-q"}, {"volume", "rm", "-f"}},
	} {
		out, _ := dockerAtErr(host, append(kind[0], "--filter", filter)...)
		if ids := strings.Fields(out); len(ids) > 0 {
			_, _ = dockerAtErr(host, append(kind[1], ids...)...)
		}
	}
}

// localEngines lists the engines on this machine's sockets, besides the
// default one, that the test's config names (the second engine's): where
// its sandboxes ran besides the default engine.
func (e *Env) localEngines() []string {
	var cfg struct{ Engine []struct{ Host string } }
	if _, err := toml.DecodeFile(e.configPath(), &cfg); err != nil {
		return nil
	}
	var hosts []string
	for _, en := range cfg.Engine {
		if strings.HasPrefix(en.Host, "unix://") && en.Host != mainDockerHost() {
			hosts = append(hosts, en.Host)
		}
	}
	return hosts
}

// Env is one test's world: a home, config and state directories, and a
// git repository with one commit on main.
type Env struct {
	t     testing.TB
	Root  string // the test's temporary directory
	Home  string
	Repo  string // the main checkout
	State string // the state root
	vars  []string
	// Cred, when set, runs commands as another user.
	Cred *userCred
}

type userCred struct{ uid, gid, dockerGid uint32 }

// NewEnv makes a fresh world for one test. The git config has no
// identity leaks from the developer: HOME, XDG dirs and GIT_CONFIG_GLOBAL
// all point inside the test directory.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	root := t.TempDir()
	return newEnvAt(t, root, nil)
}

func newEnvAt(t testing.TB, root string, cred *userCred) *Env {
	e := &Env{t: t, Root: root, Home: filepath.Join(root, "home"), Cred: cred}
	e.State = filepath.Join(e.Home, ".local", "state", "git-sandbox")
	for _, d := range []string{e.Home, filepath.Join(e.Home, ".config", "git-sandbox")} {
		must(t, os.MkdirAll(d, 0o755))
	}
	gitconfig := filepath.Join(e.Home, ".gitconfig")
	must(t, os.WriteFile(gitconfig, []byte("[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"), 0o644))
	e.WriteConfig("base_image = %q\n[rescue]\ninterval = \"1s\"\n[limits]\nmemory = \"1g\"\npids = 256\n", baseImage)
	e.vars = []string{
		"PATH=" + binDir + ":" + os.Getenv("PATH"),
		"HOME=" + e.Home,
		"XDG_CONFIG_HOME=" + filepath.Join(e.Home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(e.Home, ".local", "state"),
		"GIT_CONFIG_GLOBAL=" + gitconfig,
		"GIT_CONFIG_NOSYSTEM=1",
		"LANG=C.UTF-8",
		"TERM=dumb",
		"GIT_SANDBOX_DEFAULT_IMAGE=" + testImage,
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		e.vars = append(e.vars, "DOCKER_HOST="+h)
	}
	e.Repo = filepath.Join(root, "repo")
	must(t, os.MkdirAll(e.Repo, 0o755))
	if cred != nil {
		chownTree(t, root, cred)
	}
	e.Git("init", "-q")
	e.WriteFile("README.md", "hello\n")
	e.Git("add", "README.md")
	e.Git("commit", "-q", "-m", "initial commit")
	t.Cleanup(func() {
		// First the supervisors, so that none makes a container or
		// writes into the test's directory after this.
		stopSupervisors(t, e.Home)
		if id := e.RepoID(); id != "" {
			removeContainers(id)
			removeWarmImages(id)
			// A copy-mode agent on the shared second engine would
			// run on, and load every test after, until the run ends.
			for _, host := range e.localEngines() {
				removeContainersAt(host, id)
			}
		}
	})
	return e
}

// stopSupervisors kills the supervisors the test's commands spawned. A
// supervisor outlives the command that spawned it (an exit snapshot waiting
// for a command's lock, a copy-mode agent still running on the second
// engine), and one still writing when the test ends makes the removal of
// the test's directory fail.
func stopSupervisors(t testing.TB, home string) {
	pids := supervisors(home)
	for pid, branch := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Logf("killed %s's supervisor (%d), still running at the end", branch, pid)
	}
	// Gone, or a zombie: either way it holds no file open.
	for pid := range pids {
		Eventually(t, 10*time.Second, fmt.Sprintf("the killed supervisor %d to end", pid), func() bool {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			_, rest, _ := bytes.Cut(stat, []byte(") "))
			return err != nil || bytes.HasPrefix(rest, []byte("Z"))
		})
	}
}

// supervisors finds the supervisors run with home as their HOME: each
// process's pid, and the branch it supervises.
func supervisors(home string) map[int]string {
	found := map[int]string{}
	for _, p := range homeProcs(home) {
		if slices.Contains(p.args, sandbox.SupervisorCommand) {
			found[p.pid] = p.args[len(p.args)-1]
		}
	}
	return found
}

// homeProc is a process of this machine, with its command line.
type homeProc struct {
	pid  int
	args []string
}

// homeProcs lists the processes run with home as their HOME (each test's
// commands have a HOME of their own), by pid.
func homeProcs(home string) []homeProc {
	var found []homeProc
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if !slices.Contains(strings.Split(string(env), "\x00"), "HOME="+home) {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		found = append(found, homeProc{pid, strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")})
	}
	return found
}

// removeWarmImages removes the warm images (setup's kept results) a test
// repository's starts made.
func removeWarmImages(repoID string) {
	out, _ := exec.Command("docker", "images", "-q", "--no-trunc", "--filter", "label=git-sandbox.warm.repo="+repoID).Output()
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		_ = exec.Command("docker", append([]string{"rmi", "-f"}, ids...)...).Run()
	}
}

// configPath is the user's config file.
func (e *Env) configPath() string {
	return filepath.Join(e.Home, ".config", "git-sandbox", "config.toml")
}

// WriteConfig replaces the user's config file.
func (e *Env) WriteConfig(format string, args ...any) {
	p := e.configPath()
	must(e.t, os.WriteFile(p, []byte(fmt.Sprintf(format, args...)), 0o644))
	if e.Cred != nil {
		must(e.t, os.Chown(p, int(e.Cred.uid), int(e.Cred.gid)))
	}
}

// RepoID computes the repository id the way git sandbox does, so the
// test can find its containers even when a command failed.
func (e *Env) RepoID() string {
	common, err := filepath.EvalSymlinks(filepath.Join(e.Repo, ".git"))
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(common))
	id := filepath.Base(e.Repo) + "-" + hex.EncodeToString(sum[:])[:12]
	createdRepos.Store(id, true)
	return id
}

// CleanupRepoAt removes, when the test ends, what git sandbox made for a
// further repository the test created at dir (its containers and warm
// images), as NewEnv does for the test's own.
func (e *Env) CleanupRepoAt(dir string) {
	e.t.Cleanup(func() {
		common, err := filepath.EvalSymlinks(filepath.Join(dir, ".git"))
		if err != nil {
			return
		}
		sum := sha256.Sum256([]byte(common))
		id := filepath.Base(dir) + "-" + hex.EncodeToString(sum[:])[:12]
		removeContainers(id)
		removeWarmImages(id)
	})
}

// Result is a finished command.
type Result struct {
	Stdout, Stderr string
	Code           int
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// runTimeout bounds one command of a test.
const runTimeout = 5 * time.Minute

// Run runs a command in dir with the test's environment. A command still
// running after runTimeout fails the test with what it printed: its
// process group (git and the git sandbox it runs) gets SIGQUIT, so a Go
// program ends with the stacks of its goroutines, which say where it hung.
func (e *Env) Run(dir string, extraEnv []string, name string, args ...string) Result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, e.vars...), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if e.Cred != nil {
		setCred(cmd, e.Cred)
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGQUIT) }
	cmd.WaitDelay = 15 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		e.t.Fatalf("%s %q still ran after %s (%v)\nstdout:\n%s\nstderr:\n%s", name, args, runTimeout, err, &stdout, &stderr)
	}
	code := 0
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			e.t.Fatalf("%s %q: %v", name, args, err)
		}
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: code}
}

// Sandbox runs `git sandbox ARGS` in the main checkout.
func (e *Env) Sandbox(args ...string) Result {
	e.t.Helper()
	return e.Run(e.Repo, nil, "git", append([]string{"sandbox"}, args...)...)
}

// MustSandbox runs git sandbox and fails the test unless it exits 0.
func (e *Env) MustSandbox(args ...string) Result {
	e.t.Helper()
	r := e.Sandbox(args...)
	if r.Code != 0 {
		e.t.Fatalf("git sandbox %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// Git runs git in the main checkout and returns trimmed stdout.
func (e *Env) Git(args ...string) string {
	e.t.Helper()
	return e.GitIn(e.Repo, args...)
}

// GitIn runs git in dir and fails the test on error.
func (e *Env) GitIn(dir string, args ...string) string {
	e.t.Helper()
	r := e.Run(dir, nil, "git", args...)
	if r.Code != 0 {
		e.t.Fatalf("git %s: %s", strings.Join(args, " "), r)
	}
	return strings.TrimSpace(r.Stdout)
}

// WriteFile writes a file in the main checkout.
func (e *Env) WriteFile(rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.Repo, rel)
	must(e.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(e.t, os.WriteFile(p, []byte(content), 0o644))
	if e.Cred != nil {
		must(e.t, os.Chown(p, int(e.Cred.uid), int(e.Cred.gid)))
	}
}

// PsEntry is one object of ps --json.
type PsEntry struct {
	Branch    string   `json:"branch"`
	State     string   `json:"state"`
	ExitCode  *int     `json:"exit_code"`
	Agent     string   `json:"agent"`
	Base      string   `json:"base"`
	Worktree  string   `json:"worktree"`
	Baseline  string   `json:"baseline"`
	Container string   `json:"container"`
	Engine    string   `json:"engine"`
	Changes   int      `json:"changes"`
	Network   string   `json:"network"`
	Denied    int      `json:"denied"`
	TooLarge  int      `json:"too_large"`
	Snapshot  string   `json:"snapshot"`
	Conflicts []string `json:"conflicts"`
	Spend     *PsSpend `json:"spend"`
}

// PsSpend is what ps --json says of a sandbox's metered spend.
type PsSpend struct {
	Metered bool `json:"metered"`
	Spent   *struct {
		CostUSD  float64 `json:"cost_usd"`
		Requests int     `json:"requests"`
	} `json:"spent"`
	Budget *struct {
		USD    float64 `json:"usd"`
		Tokens int64   `json:"tokens"`
	} `json:"budget"`
	Over bool `json:"over"`
}

// Ps returns ps --json.
func (e *Env) Ps() []PsEntry {
	e.t.Helper()
	r := e.MustSandbox("ps", "--json")
	var list []PsEntry
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		e.t.Fatalf("ps --json: %v\n%s", err, r.Stdout)
	}
	return list
}

// psEntry returns the ps entry of branch, if ps lists it.
func (e *Env) psEntry(branch string) (PsEntry, bool) {
	e.t.Helper()
	for _, p := range e.Ps() {
		if p.Branch == branch {
			return p, true
		}
	}
	return PsEntry{}, false
}

// PsOf returns the ps entry of branch.
func (e *Env) PsOf(branch string) PsEntry {
	e.t.Helper()
	p, ok := e.psEntry(branch)
	if !ok {
		e.t.Fatalf("ps has no sandbox %s", branch)
	}
	return p
}

// hasSandbox reports whether ps lists branch.
func (e *Env) hasSandbox(branch string) bool {
	e.t.Helper()
	_, ok := e.psEntry(branch)
	return ok
}

// readFile returns a file's content, or "<absent>".
func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "<absent>"
	}
	return string(b)
}

// fileState is a path's mode and content (a symlink's target, not
// followed), or "<absent>".
func fileState(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return "<absent>"
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		l, _ := os.Readlink(p)
		return fi.Mode().String() + " -> " + l
	}
	b, _ := os.ReadFile(p)
	return fi.Mode().String() + " " + string(b)
}

// HoldSandboxLock takes a sandbox's snapshot lock as git sandbox does
// (waiting, and saying so, so the supervisor's interval snapshots give
// way), and returns the function that releases it. While it is held no
// snapshot, restore or start of that sandbox is under way: what the test
// looks at then is what they left, not what one is doing.
func (e *Env) HoldSandboxLock(branch string) func() {
	e.t.Helper()
	l := worktree.Layout{Root: e.State, RepoID: e.RepoID()}
	unlock, err := record.LockFor(l.Lock(branch), 2*time.Minute)
	if err != nil {
		e.t.Fatalf("take the snapshot lock of %s: %v", branch, err)
	}
	return unlock
}

// Worktree returns a sandbox's worktree path.
func (e *Env) Worktree(branch string) string {
	return e.PsOf(branch).Worktree
}

// PrivateGitDir returns a sandbox's private git directory.
func (e *Env) PrivateGitDir(branch string) string {
	return filepath.Join(filepath.Dir(e.Worktree(branch)), "git")
}

// GivenObjects is the object store of what a sandbox was given beyond the
// visible store; VisibleObjects is the repository's visible store.
func (e *Env) GivenObjects(branch string) string {
	dir := strings.ReplaceAll(strings.ReplaceAll(branch, "%", "%25"), "/", "%2F")
	return filepath.Join(e.State, e.RepoID(), dir, "given")
}

func (e *Env) VisibleObjects() string {
	return filepath.Join(e.State, e.RepoID(), ".visible", "objects")
}

// HostState captures everything of the host repository an attack must not
// change: config, hooks, every ref outside refs/sandbox/, and the files of
// the main checkout.
func (e *Env) HostState() map[string]string {
	e.t.Helper()
	st := map[string]string{}
	gitDir := filepath.Join(e.Repo, ".git")
	for _, name := range []string{"config", "HEAD", "packed-refs", "info/exclude", "info/attributes", "info/grafts", "shallow", "objects/info/alternates", "FETCH_HEAD", "ORIG_HEAD", "COMMIT_EDITMSG"} {
		b, err := os.ReadFile(filepath.Join(gitDir, name))
		if err == nil {
			st[".git/"+name] = string(b)
		} else {
			st[".git/"+name] = "<absent>"
		}
	}
	for _, dir := range []string{"hooks", "refs"} {
		_ = filepath.WalkDir(filepath.Join(gitDir, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(gitDir, p)
			if strings.HasPrefix(rel, "refs/sandbox") {
				return filepath.SkipDir
			}
			info, _ := d.Info()
			if d.IsDir() {
				st[".git/"+rel+"/"] = info.Mode().String()
				return nil
			}
			b, _ := os.ReadFile(p)
			st[".git/"+rel] = info.Mode().String() + " " + string(b)
			return nil
		})
	}
	refs := e.Run(e.Repo, nil, "git", "for-each-ref", "--format=%(objectname) %(refname)")
	for _, line := range strings.Split(refs.Stdout, "\n") {
		if line != "" && !strings.Contains(line, " refs/sandbox/") {
			st["ref "+line] = "present"
		}
	}
	_ = filepath.WalkDir(e.Repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(e.Repo, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			st["checkout/"+rel] = string(b)
		}
		return nil
	})
	return st
}

// AssertSameHostState fails when any host state differs from before. The
// sandbox branches named in allowed may have been created, moved or deleted.
func (e *Env) AssertSameHostState(before map[string]string, allowed ...string) {
	e.t.Helper()
	after := e.HostState()
	skip := func(k string) bool {
		for _, b := range allowed {
			if strings.HasSuffix(k, " refs/heads/"+b) || k == ".git/refs/heads/"+b {
				return true
			}
		}
		return false
	}
	var diffs []string
	for k, v := range before {
		if skip(k) {
			continue
		}
		if after[k] != v {
			diffs = append(diffs, fmt.Sprintf("changed: %s\n  before: %q\n  after:  %q", k, trunc(v), trunc(after[k])))
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok && !skip(k) {
			diffs = append(diffs, fmt.Sprintf("added: %s = %q", k, trunc(v)))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		e.t.Errorf("the host repository changed:\n%s", strings.Join(diffs, "\n"))
	}
}

func trunc(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Inspect returns docker inspect of a container as a generic document.
func Inspect(t testing.TB, name string) map[string]any {
	t.Helper()
	out, err := exec.Command("docker", "inspect", name).Output()
	if err != nil {
		t.Fatalf("docker inspect %s: %v", name, err)
	}
	var docs []map[string]any
	must(t, json.Unmarshal(out, &docs))
	return docs[0]
}

// Eventually polls cond until it holds or the timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// EventuallyOr is Eventually that says more when it times out: what diag
// returns then (the state of what was awaited).
func EventuallyOr(t testing.TB, timeout time.Duration, what string, cond func() bool, diag func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, diag())
}

// notRunHere ends a test that this machine cannot run: under CI=true it
// fails (CI runs every test), elsewhere it is skipped, saying why and
// what would let it run.
func notRunHere(t testing.TB, why, fix string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("cannot run: %s (%s)", why, fix)
	}
	t.Skipf("NOT RUN: %s (%s; under CI=true this fails)", why, fix)
}

// requireRunsc ends the test (notRunHere) unless the engine at host has
// runsc registered.
func requireRunsc(t testing.TB, host string) {
	t.Helper()
	if runtimes := dockerAt(t, host, "info", "--format", "{{json .Runtimes}}"); !strings.Contains(runtimes, `"runsc"`) {
		notRunHere(t, "runsc is not registered in the second engine (runtimes "+runtimes+")", "engine.sh installs Debian's runsc: apt-get install runsc")
	}
}
