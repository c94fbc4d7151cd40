package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script/*.txt")

// TestMain lets scripts run this package's main as git-sandbox: on PATH,
// `exec git sandbox …` reaches it through git, as a user's would.
func TestMain(m *testing.M) {
	testscript.Main(scriptsM{m}, map[string]func(){
		"git-sandbox": func() {
			installFakeEngine()
			os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// scriptsM runs the tests with more scripts at once than the default
// (GOMAXPROCS) unless -parallel says otherwise: a script spends most of
// its time waiting for the processes it starts, not computing.
type scriptsM struct{ m *testing.M }

// Run implements testscript.TestingM.
func (s scriptsM) Run() int {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(max(4, runtime.GOMAXPROCS(0))))
	}
	return s.m.Run()
}

// TestScripts runs testdata/script/*.txt: the parse-and-print layer, end
// to end through the real binary and real git, with no Docker daemon.
// DOCKER_HOST points at nothing, so a command that reaches for the daemon
// fails instead of passing by accident. Run with -update to accept new
// output.
func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		UpdateScripts:       *update,
		RequireExplicitExec: true,
		Setup:               setupScript,
		Condition:           scriptCondition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":      cmdExits,
			"normalize":  cmdNormalize,
			"fakeengine": cmdFakeEngine,
			"settle":     cmdSettle,
			"grab":       cmdGrab,
		},
	})
}

// scriptCondition knows [proxyable]: the test binary, which the scripts
// run as git-sandbox, can be the egress proxy (it is static; built with
// cgo, as under -race, it is not, and allowlist starts refuse it).
func scriptCondition(cond string) (bool, error) {
	if cond != "proxyable" {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return false, err
	}
	defer f.Close()
	return proxyimage.CheckStatic(f, "test binary") == nil, nil
}

// setupScript gives each script a world of its own: a home, config and
// state directories, a git identity and fixed commit dates (so commit ids
// are the same on every run), and no Docker daemon.
func setupScript(env *testscript.Env) error {
	home := filepath.Join(env.WorkDir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".config", "git-sandbox"), 0o755); err != nil {
		return err
	}
	gitconfig := filepath.Join(home, ".gitconfig")
	const identity = "[user]\n\tname = Test User\n\temail = test@example.com\n[init]\n\tdefaultBranch = main\n"
	if err := os.WriteFile(gitconfig, []byte(identity), 0o644); err != nil {
		return err
	}
	for k, v := range map[string]string{
		"HOME":                home,
		"XDG_CONFIG_HOME":     filepath.Join(home, ".config"),
		"XDG_STATE_HOME":      filepath.Join(home, ".local", "state"),
		"GIT_CONFIG_GLOBAL":   gitconfig,
		"GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_DATE":     "2026-01-01T00:00:00Z",
		"GIT_COMMITTER_DATE":  "2026-01-01T00:00:00Z",
		"DOCKER_HOST":         "unix:///nonexistent/docker.sock",
		"LANG":                "C.UTF-8",
		"TERM":                "dumb",
		"UID_GID":             strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid()),
		engineVar:             filepath.Join(env.WorkDir, ".engine"),
		// A binary built with -race (make check) sleeps a second before
		// it exits unless told not to; scripts run hundreds of them.
		"GORACE": strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0"),
	} {
		env.Setenv(k, v)
	}
	env.Defer(func() { killLeftovers(engineVar+"="+env.Getenv(engineVar), env.Getenv(engineVar)) })
	return nil
}

// cmdExits runs a program and checks its exit status; its output is then
// what stdout and stderr look at.
//
//	exits 2 git sandbox no-such-command
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits STATUS PROGRAM [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// cmdGrab sets a variable to what the first group of a regexp matched
// first in the last command's stdout or stderr (or a file), for the ids
// that differ between runs (snapshots, commits).
//
//	grab SNAP stderr 'its work is in snapshot ([0-9a-f]{12})'
func cmdGrab(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: grab VAR stdout|stderr|FILE REGEXP")
	}
	re, err := regexp.Compile(`(?m)` + args[2])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile(args[1]))
	if len(m) < 2 {
		ts.Fatalf("grab: no match for %s in %s", args[2], args[1])
	}
	ts.Setenv(args[0], m[1])
}

// cmdNormalize writes a file with what differs between runs replaced by
// names: the work directory, the repository id, the per-repository suffix
// of container names and the user's uid:gid.
//
//	normalize stdout plan.json
func cmdNormalize(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: normalize FILE|stdout|stderr OUT")
	}
	s := ts.ReadFile(args[0])
	work := ts.Getenv("WORK")
	if real, err := filepath.EvalSymlinks(work); err == nil && real != work {
		s = strings.ReplaceAll(s, real, "$WORK")
	}
	s = strings.ReplaceAll(s, work, "$WORK")
	s = strings.ReplaceAll(s, `"`+ts.Getenv("UID_GID")+`"`, `"$UID:$GID"`)
	s = repoID.ReplaceAllString(s, "$1-$$REPO_HASH")
	s = containerHash.ReplaceAllString(s, "$1-$$HASH")
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(s), 0o644))
}

var (
	// repoID is <directory name>-<12 hex digits> (worktree.Repo.ID).
	repoID = regexp.MustCompile(`\b(repo)-[0-9a-f]{12}\b`)
	// containerHash is the per-repository suffix of container names.
	containerHash = regexp.MustCompile(`(git-sandbox-[A-Za-z0-9_.-]+)-[0-9a-f]{8}\b`)
)
