package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// StartCmd is git sandbox start.
type StartCmd struct {
	Branch  string   `arg:"" help:"The sandbox's branch (created from --base)."`
	Command []string `arg:"" optional:"" help:"For --agent shell: the command to run, after --."`

	Base    string   `help:"Branch (or commit) to start from and land on; default: the current branch." placeholder:"REF"`
	Carry   bool     `help:"Bring this checkout's uncommitted work along, as part of the baseline."`
	Agent   string   `short:"a" help:"Agent: ${agents} (default from config: ${default_agent})."`
	Prompt  string   `short:"p" help:"The task. With it the agent runs headless; without it, interactively."`
	Verify  string   `help:"Command that decides whether the work is done (run by verify and land)." placeholder:"CMD"`
	Detach  bool     `short:"d" help:"Return at once; the agent runs in the background."`
	Env     []string `short:"e" sep:"none" help:"Pass an environment variable: KEY (the host's value) or KEY=VALUE (passed unchanged, commas included)." placeholder:"KEY[=VAL]"`
	Image   string   `help:"Container image (default from config: ${default_image})."`
	Network string   `help:"Container network: ${network_modes} (default from config: ${network_default})." enum:",${network_enum}" default:""`
	Allow   []string `sep:"none" help:"Let the agent reach HOST[:PORT] (or *.SUFFIX) through the proxy, on top of the allow list (allowlist mode; repeatable, or HOST,HOST); methods and path prefixes may follow a host: \"HOST GET,HEAD /PATH/\"." placeholder:"HOST[:PORT],..."`
	Runtime string   `help:"OCI runtime, such as runsc or kata-runtime."`
	Engine  string   `help:"Container engine from your config ([[engine]] name), or auto: the one with the most memory left." placeholder:"NAME"`
	Budget  string   `help:"Dollars the agent may spend on model calls, metered by the credential broker (default: budget.model); for an existing sandbox, its new budget." placeholder:"DOLLARS"`
	Memory  string   `help:"Memory limit, such as 4g."`
	CPUs    float64  `name:"cpus" help:"CPU limit, such as 1.5."`
	Pids    int64    `help:"Process limit."`
	Rerun   bool     `help:"For an existing sandbox: run its original task again."`
	Publish []string `help:"Publish a container port on 127.0.0.1: PORT (on a free host port) or HOST_PORT:PORT; repeatable." placeholder:"PORT"`
	DryRun  bool     `help:"Print the plan (mounts, labels, argv, limits) and change nothing."`
	JSON    bool     `help:"With --dry-run: print the plan as JSON."`
}

// Help is start's long help.
func (c *StartCmd) Help() string {
	return `Creates branch BRANCH from --base (default: the current branch) in a linked
worktree under the state directory, takes the baseline snapshot, gives the agent
its own git directory, and runs the agent in a hardened container: your user id,
no capabilities, no new privileges, pid/memory/CPU limits, no Docker socket.

Without -d, start stays in the foreground until the agent exits and exits with
its code; from a terminal the agent gets a real TTY. With -d it returns at once.
Either way a supervisor takes a snapshot every rescue.interval.

Starting a sandbox that exists goes on in it, and never runs its task again
unasked: with -p (or, for --agent shell, a command after --) the agent gets a
follow-up task in the same sandbox, continuing its conversation where the agent
can (claude --continue, codex resume --last); without one, the agent continues
interactively on a terminal, and start refuses without one. --rerun runs the
original task again. A follow-up runs in a new container made like the first
(same image, mounts, hardening); --verify and the limits may change, while
--base, --carry, --agent, --image, --network, --allow, --runtime, --engine and -e
cannot, and are refused.

--engine NAME runs the sandbox on an engine of your config ([[engine]]), and
every later command about it goes there; auto picks the one with the most
memory left. On an engine in copy mode (one that cannot see this machine's
files) the worktree and the agent's repository live in volumes there, the
image is copied there when it is missing, and snapshots come back here as
checked packs; --carry and --publish are not available there yet.

For --agent shell, -p with a command after -- is the task's description:
recorded (land's default message) and passed as GIT_SANDBOX_PROMPT.

The network is one of: allowlist (the default: the agent joins a network of its
own with no route out, and reaches only the hosts its allow list names through
an egress proxy; git sandbox net shows what it tried), none, or open (a network
of its own: any host and this machine's ports, but no other sandbox; your config
or --network only).
git sandbox config show prints the allow list and where each entry came from.
--publish (and a devcontainer's forwardPorts) puts a server of the agent's on
127.0.0.1 of this machine: in allowlist mode through the sandbox's proxy, which
carries connections in to the agent's port and nothing out; not with none.
A host the agent's own CLI needs and was denied is named after an attached run,
with a hint naming --allow.

Credentials: each [[secret]] in your config (name, hosts, and from_env,
from_file or from_command) gives the agent a placeholder in that variable,
never the value; the proxy puts the value into request headers sent to the
secret's hosts only, over TLS it terminates with a CA made for the sandbox
(trusted inside it), and refuses the placeholder anywhere else. Allowlist
network only.

The home directory is the sandbox's own, new for each sandbox; only the agent's
login files persist (copied in after setup, back when the agent exits), per
agent or, with agent_home = "per-repo" in your config, per repository.

Examples:
  git sandbox start fix-login --agent claude -p "fix the login redirect"
  git sandbox start t2 -d --agent shell -- sh -c 'make test > out.txt'
  git sandbox start fix-login -p "also cover the logout redirect"   # follow-up`
}

// checkLimits checks the limits given as flags (0 and "" mean not given).
func (c *StartCmd) checkLimits() error {
	if c.CPUs != 0 {
		if err := config.CheckCPUs("", "--cpus", c.CPUs); err != nil {
			return err
		}
	}
	if c.Pids != 0 {
		if err := config.CheckPids("", "--pids", c.Pids); err != nil {
			return err
		}
	}
	if c.Memory != "" {
		return config.CheckMemory("", "--memory", c.Memory)
	}
	return nil
}

// Run starts the sandbox.
func (c *StartCmd) Run(app *App) error {
	if c.JSON && !c.DryRun {
		return usererr.New("--json goes with --dry-run").Hint("git sandbox ps --json lists sandboxes as JSON")
	}
	if err := c.checkLimits(); err != nil {
		return err
	}
	env, err := app.Env()
	if err != nil {
		return err
	}
	res, err := env.Start(app.Ctx, sandbox.StartOptions{
		Branch: c.Branch, Base: c.Base, Carry: c.Carry, Agent: c.Agent, Prompt: c.Prompt,
		Verify: c.Verify, Args: c.Command, Detach: c.Detach, DryRun: c.DryRun, Env: c.Env,
		Image: c.Image, Network: c.Network, Allow: splitAllow(c.Allow), Runtime: c.Runtime, Memory: c.Memory, CPUs: c.CPUs,
		Pids: c.Pids, Rerun: c.Rerun, Publish: c.Publish, Engine: c.Engine, Budget: c.Budget, IO: app.IO(),
		Subdir: app.Subdir(env.Repo.WorkTree),
	})
	if err != nil {
		return err
	}
	if c.DryRun {
		return printPlan(app, res.Plan, c.JSON)
	}
	name := termsafe.String(c.Branch)
	if c.Detach {
		verb := "started"
		if res.Resumed {
			verb = "resumed"
		}
		app.UI.Infof("%s sandbox %s (container %s)", verb, name, res.Sandbox.Container)
		for _, p := range res.Sandbox.Ports() {
			app.UI.Infof("port %d published on %s:%d", p.Port, p.HostIP, p.HostPort)
		}
		app.UI.Hintf("git sandbox logs -f %s follows it; git sandbox wait %s waits for it", name, name)
		return nil
	}
	if !sayOutOfMemory(app, res.Sandbox, res.ExitCode) {
		app.UI.Infof("agent in %s exited with code %d", name, res.ExitCode)
	}
	if n, ok := res.Sandbox.Changes(app.Ctx); ok && n == 0 {
		app.UI.Infof("%s changed no file", name)
		task := `-p "TASK"`
		if res.Sandbox.Agent == "shell" {
			task = "-- CMD"
		}
		app.UI.Hintf("git sandbox start %s %s gives it a follow-up task; git sandbox rm %s removes it", name, task, name)
	} else {
		app.UI.Hintf("git sandbox diff %s shows the change; git sandbox land %s lands it", name, name)
	}
	if res.ExitCode != 0 {
		return usererr.ExitStatus(res.ExitCode)
	}
	return nil
}

// sayOutOfMemory says so when the engine ended the sandbox's agent for
// memory (with its limit and how to give it more), and reports whether it
// did.
func sayOutOfMemory(app *App, sb *sandbox.Sandbox, code int) bool {
	oom := sb.OutOfMemory(app.Ctx, code)
	if oom == "" {
		return false
	}
	name := termsafe.String(sb.Branch)
	app.UI.Infof("agent in %s exited with code %d: %s", name, code, oom)
	app.UI.Hintf("git sandbox start %s --memory SIZE runs it again with more (limits.memory in your config sets it for new sandboxes)", name)
	return true
}

// printPlan prints the plan start returned, which is already redacted:
// the values of passed-through variables are never in it.
func printPlan(app *App, p *sandbox.Plan, asJSON bool) error {
	if asJSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(p)
	}
	w := app.Stdout
	printPlanSandbox(w, p)
	p.Container.Describe(w)
	if p.Egress != nil {
		p.Egress.Describe(w)
	}
	return nil
}

// printPlanSandbox prints what the plan says of the sandbox itself: its
// branch, base, engine, workspace, record and the work it runs.
func printPlanSandbox(w io.Writer, p *sandbox.Plan) {
	fmt.Fprintf(w, "sandbox   %s\n", termsafe.String(p.Branch))
	fmt.Fprintf(w, "base      %s (%s)\n", termsafe.String(p.Base), p.BaseCommit)
	if p.Engine != "" {
		fmt.Fprintf(w, "engine    %s\n", termsafe.String(p.Engine))
	}
	for _, l := range p.WorkspaceLines() {
		fmt.Fprintf(w, "%-9s %s\n", l.Label, l.Text)
	}
	fmt.Fprintf(w, "record    %s\n", p.Record)
	fmt.Fprintf(w, "carry     %v\n", p.Carry)
	if p.Setup != "" {
		fmt.Fprintf(w, "setup     %s\n", termsafe.String(p.Setup))
		fmt.Fprintf(w, "          (skipped when this repository's warm image for the same image, setup and setup_inputs exists)\n")
	}
	if p.Verify != "" {
		fmt.Fprintf(w, "verify    %s\n", termsafe.String(p.Verify))
	}
	fmt.Fprintf(w, "snapshots every %s\n", p.Interval)
}

// networkVars names the network modes in start's help and its flag's enum,
// from the one list the container package keeps.
func networkVars() kong.Vars {
	var names []string
	for _, m := range container.NetworkModes() {
		names = append(names, string(m))
	}
	return kong.Vars{
		"network_modes":   container.NetworkModeNames(),
		"network_default": string(config.Defaults().Network),
		"network_enum":    strings.Join(names, ","),
	}
}

// splitAllow splits --allow's values at commas, as it always took
// HOST,HOST, except a value with rules ("HOST GET,HEAD /PATH/"), whose
// commas separate methods.
func splitAllow(values []string) []string {
	var out []string
	for _, v := range values {
		if strings.ContainsAny(strings.TrimSpace(v), " \t") {
			out = append(out, v)
			continue
		}
		out = append(out, strings.Split(v, ",")...)
	}
	return out
}
