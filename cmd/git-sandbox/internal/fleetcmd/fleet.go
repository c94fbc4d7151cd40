// Package fleetcmd is git sandbox fleet: the commands that start, watch,
// stop, resume, land and remove a fleet of sandboxes (internal/fleet does
// the work).
package fleetcmd

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/internal/fleet"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// FleetCmd groups the fleet commands.
type FleetCmd struct {
	Start  FleetStartCmd  `cmd:"" help:"Start one sandbox per [[task]] of a tasks file, at most max_parallel at once."`
	Ps     FleetPsCmd     `cmd:"" help:"List a fleet's tasks: queued, running, exited."`
	Wait   FleetWaitCmd   `cmd:"" help:"Wait until no task of a fleet is queued or running."`
	Stop   FleetStopCmd   `cmd:"" help:"Cancel a fleet's queued tasks and stop its running agents."`
	Resume FleetResumeCmd `cmd:"" help:"Start a new runner for a fleet's queued tasks and those fleet stop cancelled."`
	Rm     FleetRmCmd     `cmd:"" help:"Remove a fleet and its sandboxes (their snapshots are kept)."`
	Land   FleetLandCmd   `cmd:"" help:"Land finished sandboxes one after another, verifying each merged tree."`
}

// Help is fleet's long help.
func (c *FleetCmd) Help() string {
	return `A fleet is many sandboxes described in one tasks file (tasks.toml.example
documents it): one [[task]] per sandbox with its branch, agent, prompt (or, for
the shell agent, command), base, verify, allow and limits, and max_parallel.
fleet start checks the whole file first — unknown keys, duplicate branches, bad
values, branches that exist — and starts nothing when any is wrong. A runner in
the background starts queued tasks as running ones exit; it outlives the
terminal. fleet land then lands the finished sandboxes in file order.`
}

// Fleets opens the repository's fleets.
func Fleets(a *cliapp.App) (*fleet.Fleets, *sandbox.Env, error) {
	env, err := a.Env()
	if err != nil {
		return nil, nil, err
	}
	return &fleet.Fleets{Store: fleet.NewStore(env.Layout.FleetDir()), SB: &fleet.Sandboxes{Env: env, Out: a.UI.Writer()}}, env, nil
}

// FleetStartCmd is git sandbox fleet start.
type FleetStartCmd struct {
	File string `arg:"" help:"The tasks file (TOML)." type:"path"`
	Name string `help:"The fleet's name (default: the file's name without .toml)." placeholder:"NAME"`
}

// Help is fleet start's long help.
func (c *FleetStartCmd) Help() string {
	return `Checks the whole tasks file, then starts its tasks in the background, at most
max_parallel at once (default: as many as the free memory holds at the tasks'
memory limit, at most two per CPU), the rest queued in file order. A task with
no base starts from the branch checked out now. The file is as trusted as
the command line: its allow entries are --allow's.`
}

// Run starts the fleet.
func (c *FleetStartCmd) Run(app *cliapp.App) error {
	fl, _, err := Fleets(app)
	if err != nil {
		return err
	}
	name := c.Name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(c.File), filepath.Ext(c.File))
	}
	if err := fleet.CheckName(name); err != nil {
		return err
	}
	abs, _ := filepath.Abs(c.File)
	f, err := fleet.Load(c.File, fl.SB)
	var st *fleet.State
	if err == nil {
		st, err = fl.Start(app.Ctx, name, abs, f)
	}
	if p, ok := errors.AsType[*fleet.Problems](err); ok {
		return usererr.Wrap(p, "%s", p.Error()).Hint("fix the file (tasks.toml.example documents every key) and start it again")
	}
	if err != nil {
		if _, ok := usererr.As(err); ok {
			return err
		}
		return usererr.Wrap(err, "%v", err).Hint("nothing was started")
	}
	app.UI.Infof("fleet %s: %d task(s), %s", name, len(f.Tasks), fleet.Describe(st.MaxParallel, f.MaxParallel > 0))
	app.UI.Hintf("git sandbox fleet ps shows them; git sandbox fleet wait waits for them; git sandbox fleet land lands them")
	return nil
}

// FleetRunCmd runs a fleet's runner (spawned by fleet start).
type FleetRunCmd struct {
	Name string `arg:""`
}

// Run runs the fleet until no task is queued or running.
func (c *FleetRunCmd) Run(app *cliapp.App) error {
	fl, env, err := Fleets(app)
	if err != nil {
		return err
	}
	unlock, err := fl.Store.LockRunner(c.Name)
	if err != nil {
		return err
	}
	defer unlock()
	d, err := env.Engine(app.Ctx)
	if err != nil {
		return err
	}
	r := &fleet.Runner{
		Store: fl.Store, Name: c.Name, Engine: d, RepoID: env.Repo.ID, Start: fl.SB.Start, Spent: fl.SB.Spent,
		Logf: func(format string, args ...any) {
			app.UI.Infof("%s %s", time.Now().Format(time.RFC3339), fmt.Sprintf(format, args...))
		},
	}
	return r.Run(app.Ctx)
}

// fleetNames resolves --fleet: the named fleet, or every one for ps.
// oneFleet opens the repository's fleets and resolves the one a command
// names (the only one when it names none).
func oneFleet(app *cliapp.App, name string) (*fleet.Fleets, *sandbox.Env, string, error) {
	fl, env, err := Fleets(app)
	if err != nil {
		return nil, nil, "", err
	}
	names, err := fleetNames(fl, name, false)
	if err != nil {
		return nil, nil, "", err
	}
	return fl, env, names[0], nil
}

func fleetNames(fl *fleet.Fleets, name string, all bool) ([]string, error) {
	if name == "" && all {
		return fl.Store.Names()
	}
	n, err := fl.Store.Resolve(name)
	if err != nil {
		return nil, err
	}
	return []string{n}, nil
}

// FleetPsCmd is git sandbox fleet ps.
type FleetPsCmd struct {
	Fleet string `arg:"" optional:"" help:"Only this fleet (default: every fleet)."`
	JSON  bool   `help:"Print a JSON array of fleets."`
}

// Run lists the fleets' tasks.
func (c *FleetPsCmd) Run(app *cliapp.App) error {
	fl, _, err := Fleets(app)
	if err != nil {
		return err
	}
	names, err := fleetNames(fl, c.Fleet, true)
	if err != nil {
		return err
	}
	reps := []*fleet.Report{}
	for _, n := range names {
		rep, err := fl.Report(app.Ctx, n)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	if c.JSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(reps)
	}
	if len(reps) == 0 {
		app.UI.Infof("no fleets in this repository")
		app.UI.Hintf("git sandbox fleet start TASKS.toml starts one")
		return nil
	}
	rows := [][]string{{"FLEET", "BRANCH", "STATE", "AGENT", "CHANGES", "NOTE"}}
	for _, rep := range reps {
		for _, r := range rep.Tasks {
			rows = append(rows, []string{rep.Name, termsafe.String(r.Branch), rowState(r), r.Agent, strconv.Itoa(r.Changes), termsafe.String(firstLine(r.Error))})
		}
	}
	cliapp.Table(app.Stdout, rows)
	for _, rep := range reps {
		runner := "ended"
		if rep.Runner {
			runner = "running"
		}
		if rep.Stopping {
			runner += ", stopping"
		}
		app.UI.Infof("fleet %s: max_parallel %d, runner %s", rep.Name, rep.MaxParallel, runner)
	}
	return nil
}

func rowState(r fleet.Row) string {
	if (r.Status == sandbox.StateExited || r.Status == fleet.Exited) && r.ExitCode != nil {
		return "exited (" + strconv.Itoa(*r.ExitCode) + ")"
	}
	return r.Status
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// FleetWaitCmd is git sandbox fleet wait.
type FleetWaitCmd struct {
	Fleet   string        `arg:"" optional:"" help:"The fleet (default: the only one)."`
	Timeout time.Duration `help:"Give up after this long (exit 124); 0 waits for ever." default:"0"`
}

// Run waits for the fleet; it fails when a task failed to start or an
// agent exited non-zero.
func (c *FleetWaitCmd) Run(app *cliapp.App) error {
	fl, _, name, err := oneFleet(app, c.Fleet)
	if err != nil {
		return err
	}
	rep, err := fl.Wait(app.Ctx, name, c.Timeout)
	if err != nil {
		return err
	}
	var bad []string
	for _, r := range rep.Tasks {
		if r.Status == fleet.Failed || (r.ExitCode != nil && *r.ExitCode != 0) {
			bad = append(bad, termsafe.String(r.Branch)+" "+rowState(r))
		}
	}
	app.UI.Infof("fleet %s: every task has ended", rep.Name)
	if len(bad) > 0 {
		return usererr.New("%d task(s) did not succeed: %s", len(bad), strings.Join(bad, ", ")).
			Hint("git sandbox fleet ps %s shows why; git sandbox logs BRANCH shows an agent's output", rep.Name)
	}
	return nil
}

// FleetStopCmd is git sandbox fleet stop.
type FleetStopCmd struct {
	Fleet   string        `arg:"" optional:"" help:"The fleet (default: the only one)."`
	Timeout time.Duration `help:"How long each agent gets to exit before it is killed." default:"10s"`
}

// Run stops the fleet.
func (c *FleetStopCmd) Run(app *cliapp.App) error {
	fl, _, name, err := oneFleet(app, c.Fleet)
	if err != nil {
		return err
	}
	stopped, err := fl.Stop(app.Ctx, name, c.Timeout)
	for _, b := range stopped {
		app.UI.Infof("stopped %s", termsafe.String(b))
	}
	if err != nil {
		return err
	}
	app.UI.Infof("fleet %s: queued tasks cancelled, %d agent(s) stopped; their work is kept", name, len(stopped))
	app.UI.Hintf("git sandbox fleet resume %s starts the cancelled tasks; git sandbox start BRANCH goes on in a stopped one", name)
	return nil
}

// FleetResumeCmd is git sandbox fleet resume.
type FleetResumeCmd struct {
	Fleet string `arg:"" optional:"" help:"The fleet (default: the only one)."`
}

// Run starts a new runner.
func (c *FleetResumeCmd) Run(app *cliapp.App) error {
	fl, env, name, err := oneFleet(app, c.Fleet)
	if err != nil {
		return err
	}
	if err := fl.Resume(name); err != nil {
		return err
	}
	if err := fleet.SpawnRunner(env, fl.Store, name); err != nil {
		return fmt.Errorf("start the fleet's runner: %w", err)
	}
	app.UI.Infof("fleet %s: a new runner starts its queued tasks", name)
	return nil
}

// FleetRmCmd is git sandbox fleet rm.
type FleetRmCmd struct {
	Fleet string `arg:"" optional:"" help:"The fleet (default: the only one)."`
	Force bool   `short:"f" help:"Also stop and remove running sandboxes and ones with work that was not landed."`
}

// Run removes the fleet.
func (c *FleetRmCmd) Run(app *cliapp.App) error {
	fl, _, name, err := oneFleet(app, c.Fleet)
	if err != nil {
		return err
	}
	removed, err := fl.Remove(app.Ctx, name, c.Force)
	for _, b := range removed {
		app.UI.Infof("removed %s", termsafe.String(b))
	}
	if err != nil {
		return err
	}
	app.UI.Infof("removed fleet %s; the snapshots stay (git sandbox rescue list)", name)
	return nil
}

// FleetLandCmd is git sandbox fleet land.
type FleetLandCmd struct {
	Branches []string `arg:"" optional:"" help:"The sandboxes, in landing order (default: the fleet's, in file order); or the fleet, by its name or tasks file, as fleet wait takes it (a sandbox of that name comes first)."`
	Fleet    string   `help:"The fleet whose sandboxes land (default: the only one)." placeholder:"NAME"`
	Continue bool     `help:"Resume the queue that stopped, at the sandbox it stopped at."`
	Abort    bool     `help:"Forget the queue that stopped (its sandboxes stay as they are)."`
}

// Help is fleet land's long help.
func (c *FleetLandCmd) Help() string {
	return `Lands sandboxes one after another, each onto its base as the previous ones
left it, as git sandbox land does — except that verify runs on the merged tree,
exactly the tree the base will hold, not on the sandbox's own work alone. Two
changes that pass verify alone and break together stop the queue.

The queue stops at the first sandbox that cannot land — a conflict, a failed
verify of the merged tree, an agent still running — and says which landed and
which did not; the rest are untouched. Fix the stopped one (git sandbox update
BRANCH brings the base in; then fix it in the sandbox) and resume with
--continue. The base moves by compare-and-swap: a land elsewhere meanwhile
makes the queue merge and verify again.`
}

// Run lands the queue.
func (c *FleetLandCmd) Run(app *cliapp.App) error {
	fl, env, err := Fleets(app)
	if err != nil {
		return err
	}
	if len(c.Branches) == 1 && c.Fleet == "" {
		// fleet land NAME lands the fleet, as fleet wait NAME waits for
		// it, unless NAME is a sandbox.
		if name, isFleet := fleetArg(fl, env, c.Branches[0]); isFleet {
			c.Fleet, c.Branches = name, nil
		}
	}
	q := &fleet.Queue{Store: fl.Store, Lander: fl.SB, Logf: app.UI.Infof}
	if c.Abort {
		if c.Continue || len(c.Branches) > 0 {
			return usererr.New("--abort takes no branches and no --continue")
		}
		if err := q.Abort(); err != nil {
			return err
		}
		app.UI.Infof("forgot the stopped landing queue; its sandboxes are as they were")
		return nil
	}
	order := c.Branches
	for _, b := range order {
		// A name that is no sandbox is refused before a queue is made
		// that would stop at it.
		if _, err := env.Find(b); err != nil {
			return err
		}
	}
	if len(order) == 0 && !c.Continue {
		name, err := fl.Store.Resolve(c.Fleet)
		if err != nil {
			return err
		}
		if order, err = fl.LandOrder(name); err != nil {
			return err
		}
	}
	// Interrupted, the land under way undoes itself and the queue keeps
	// its place for --continue.
	st, err := q.Run(app.Ctx, order, c.Continue)
	if st != nil {
		for _, l := range st.Landed[st.First:] {
			if l.Commit == "" {
				app.UI.Infof("%s: nothing to land", termsafe.String(l.Branch))
				continue
			}
			app.UI.Infof("landed %s as %s", termsafe.String(l.Branch), l.Commit[:min(12, len(l.Commit))])
		}
	}
	if stop, ok := errors.AsType[*fleet.StopError](err); ok {
		rest := stop.State.Rest()
		app.UI.Infof("stopped at %s; not landed: %s", termsafe.String(stop.State.Stopped), termsafe.Join(rest, ", "))
		app.UI.Hintf("fix %s (git sandbox update %s, then fix it there), then git sandbox fleet land --continue", termsafe.String(stop.State.Stopped), termsafe.String(stop.State.Stopped))
		return stop.Err
	}
	if err != nil {
		return err
	}
	app.UI.Infof("landed %d sandbox(es)", len(st.Landed)-st.First)
	return nil
}

// fleetArg says whether fleet land's one argument names a fleet (by its
// name or its tasks file) and no sandbox: a sandbox's name keeps meaning
// that sandbox (--fleet names the fleet of the same name).
func fleetArg(fl *fleet.Fleets, env *sandbox.Env, arg string) (name string, isFleet bool) {
	name, err := fl.Store.Resolve(arg)
	if err != nil {
		return "", false
	}
	if _, err := env.Find(arg); err == nil {
		return "", false
	}
	return name, true
}
