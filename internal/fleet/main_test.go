package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/testenv"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// TestMain keeps the user's git configuration out, and stands in for the
// fleet's runner when SpawnRunner starts this binary as one: it says it
// is in charge (RunnerPID), as the real runner does once it holds its
// lock, and ends.
func TestMain(m *testing.M) {
	if len(os.Args) == 4 && os.Args[1] == RunnerCommand {
		os.Exit(standInRunner(os.Args[3]))
	}
	testenv.Main(m, "fleet")
}

func standInRunner(name string) int {
	repo, err := worktree.Open(context.Background(), ".")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	l := worktree.Layout{Root: os.Getenv("GIT_SANDBOX_STATE_DIR"), RepoID: repo.ID}
	// Said before it takes charge: the test reads the log once it has.
	fmt.Println("stand-in runner in charge of", name)
	if _, err := NewStore(l.FleetDir()).Update(name, func(st *State) error {
		st.RunnerPID = os.Getpid()
		return nil
	}); err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// fleetEnv is a repository with one commit on main, its sandboxes on the
// fake engine, and its fleets.
type fleetEnv struct {
	t     *testing.T
	repo  string
	env   *sandbox.Env
	fake  *enginefake.Engine
	store *Store
	fl    *Fleets
	out   bytes.Buffer
}

func newFleetEnv(t *testing.T) *fleetEnv {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fe := &fleetEnv{t: t, repo: filepath.Join(root, "src", "repo"), fake: enginefake.New(config.DefaultImage())}
	if err := os.MkdirAll(fe.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	fe.git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(fe.repo, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fe.git("add", "-A")
	fe.git("commit", "-q", "-m", "initial")
	repo, err := worktree.Open(context.Background(), fe.repo)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.Agent = "shell"
	cfg.Network = container.NetworkNone
	fe.env = sandbox.NewEnv(repo, cfg, filepath.Join(root, "state"), ui.New(&fe.out, ui.Options{NoColor: true}))
	fe.env.Engines = sandbox.ConnectorFunc(func(context.Context, string) (sandbox.Engine, error) { return fe.fake, nil })
	fe.env.Background = noBackground{}
	fe.store = NewStore(fe.env.Layout.FleetDir())
	fe.fl = &Fleets{Store: fe.store, SB: &Sandboxes{Env: fe.env, Out: &fe.out}}
	return fe
}

// noBackground starts no supervisor (this binary is not git-sandbox) and
// purges the trash in place.
type noBackground struct{}

func (noBackground) Supervise(string) error   { return nil }
func (noBackground) Purge(trash string) error { return workspace.Purge(trash) }

func (fe *fleetEnv) git(args ...string) string {
	fe.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = fe.repo
	out, err := cmd.CombinedOutput()
	if err != nil {
		fe.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// start starts a task's sandbox as the runner does.
func (fe *fleetEnv) start(branch string) {
	fe.t.Helper()
	if err := fe.fl.SB.Start(context.Background(), Task{Branch: branch, Agent: "shell", Command: []string{"sleep", "infinity"}, Base: "main"}); err != nil {
		fe.t.Fatalf("start %s: %v", branch, err)
	}
}

// create writes a fleet of the given tasks (branch -> status).
func (fe *fleetEnv) create(name string, tasks ...TaskState) {
	fe.t.Helper()
	if err := fe.store.Create(&State{Name: name, MaxParallel: 2, Tasks: tasks}); err != nil {
		fe.t.Fatal(err)
	}
}

func task(branch, status string) TaskState {
	return TaskState{Task: Task{Branch: branch, Agent: "shell", Command: []string{"sleep", "infinity"}}, Status: status}
}
