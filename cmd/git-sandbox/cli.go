package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/fleetcmd"
	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/netcmd"
	"github.com/git-sandbox/git-sandbox/container/kube"
	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/cliparse"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

const description = `Hand a task to an AI coding agent that runs in a Docker container on its own
linked git worktree, then land the result as one reviewed commit.

The agent gets its own git directory: it can never touch your checkout, your
other branches, your hooks or your git configuration, and every state of its
work is kept as a rescue snapshot.`

const exitStatusHelp = `EXIT STATUS
  0    success
  1    an error (the message says which)
  2    the command line could not be parsed
  3    land: the change conflicts with the base branch; nothing was changed
       update: conflicts remain, marked in the sandbox's files
       fleet land: the queue stopped at a conflict
  4    refused: the sandbox is running, verify failed or is stale, or unlanded work would be lost
       fleet land: the queue stopped at a running sandbox or a failed verify of the merged tree
  124  wait, fleet wait: the timeout passed
  start (attached) and wait exit with the agent's own exit code.`

// CLI is the command line of git sandbox.
type CLI struct {
	Dir         string           `short:"C" placeholder:"PATH" help:"Run as if git sandbox was started in PATH."`
	ShowVersion kong.VersionFlag `name:"version" help:"Print the version and exit."`

	Start     StartCmd          `cmd:"" help:"Create a sandbox and run an agent in it (or resume one)."`
	Ps        PsCmd             `cmd:"" help:"List this repository's sandboxes."`
	Dash      DashCmd           `cmd:"" help:"A live, interactive view of this repository's sandboxes."`
	Conflicts ConflictsCmd      `cmd:"" help:"Forecast which sandboxes conflict with their base or each other."`
	Wait      WaitCmd           `cmd:"" help:"Wait for a sandbox's agent to exit; exit with its code."`
	Ports     PortsCmd          `cmd:"" help:"Show the ports a sandbox publishes on 127.0.0.1."`
	Logs      LogsCmd           `cmd:"" help:"Show a sandbox's output."`
	Net       netcmd.NetCmd     `cmd:"" help:"Show what a sandbox's agent reached and was denied on the network."`
	Usage     UsageCmd          `cmd:"" help:"What the agents spent on model calls, metered by the credential broker."`
	Budget    BudgetCmd         `cmd:"" help:"Show or change what a sandbox may spend on model calls."`
	Attach    AttachCmd         `cmd:"" help:"Connect your terminal to a running sandbox."`
	Exec      ExecCmd           `cmd:"" help:"Run a command in a running sandbox."`
	Stop      StopCmd           `cmd:"" help:"Stop a sandbox's agent (its work is kept)."`
	Rm        RmCmd             `cmd:"" help:"Remove a sandbox (its snapshots are kept)."`
	Diff      DiffCmd           `cmd:"" help:"Show exactly what land would apply, with review flags."`
	Land      LandCmd           `cmd:"" help:"Land the sandbox's work as one commit on its base branch."`
	Update    UpdateCmd         `cmd:"" help:"Bring the base branch's new commits into a sandbox (3-way merge)."`
	Fleet     fleetcmd.FleetCmd `cmd:"" help:"Many sandboxes from one tasks file: start, ps, wait, stop, resume, rm, land."`
	Sync      SyncCmd           `cmd:"" help:"Bring the agent's commits back onto the sandbox branch."`
	Verify    VerifyCmd         `cmd:"" help:"Run the verify command on the sandbox's work now."`
	Rescue    RescueCmd         `cmd:"" help:"Snapshots: list, show, restore, snapshot, prune."`
	Hooks     HooksCmd          `cmd:"" help:"Install, remove or inspect the pre-push hook."`
	Hook      HookCmd           `cmd:"" help:"Run by the installed hooks."`
	Image     ImageCmd          `cmd:"" help:"Build the sandbox image."`
	Config    ConfigCmd         `cmd:"" help:"Show the effective configuration."`
	Doctor    DoctorCmd         `cmd:"" help:"Check git, Docker, the image and the configuration."`
	MCP       MCPCmd            `cmd:"" name:"mcp" help:"Serve the Model Context Protocol: the agent you talk to hands tasks out to sandboxes."`

	Version VersionCmd `cmd:"" help:"Print the version."`

	Supervise SuperviseCmd         `cmd:"" name:"__supervise" hidden:"" help:"Snapshot a running sandbox (started by start)."`
	Man       ManCmd               `cmd:"" name:"__man" hidden:"" help:"Print the man page."`
	Purge     PurgeCmd             `cmd:"" name:"__purge" hidden:"" help:"Delete what removed sandboxes left."`
	Proxy     ProxyCmd             `cmd:"" name:"__proxy" hidden:"" help:"Run a sandbox's egress proxy (started in its proxy container)."`
	ProxyLoad ProxyLoadCmd         `cmd:"" name:"__proxy-load" hidden:"" help:"Load a proxy's configuration into its volumes (started in the proxy's image)."`
	ProxyHeld ProxyHeldCmd         `cmd:"" name:"__proxy-held" hidden:"" help:"Print the connections a proxy holds (run in a copy-mode proxy's container)."`
	ProxyLog  ProxyLogCmd          `cmd:"" name:"__proxy-log" hidden:"" help:"Print a proxy's decision log from an offset (run in a copy-mode proxy's container)."`
	NetProbe  NetProbeCmd          `cmd:"" name:"__netprobe" hidden:"" help:"One end of the probe of a cluster's NetworkPolicy (started in the proxy's image)."`
	FleetRun  fleetcmd.FleetRunCmd `cmd:"" name:"__fleet-run" hidden:"" help:"Run a fleet's runner (started by fleet start)."`
}

// App is what every command's Run receives (see package cliapp).
type App = cliapp.App

// stopGrace is how long a command may take to wind up after SIGTERM.
const stopGrace = 15 * time.Second

// Main runs git sandbox with args and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	p := ui.FromEnv(stderr)
	if p.Tracing() {
		gitcmd.SetTrace(p.Tracef)
		kube.SetTrace(p.Tracef)
		defer gitcmd.SetTrace(nil)
		defer kube.SetTrace(nil)
	}
	// Termination cancels what runs; handlers pushed further in (verify,
	// an attached agent, a paused snapshot) decide first while they run.
	// What does not end within stopGrace of it is ended: no command may
	// ignore SIGTERM, whatever the agent put in its way.
	ctx, cancel := context.WithCancel(context.Background())
	pop := sigstack.Push(func(os.Signal) {
		cancel()
		time.AfterFunc(stopGrace, func() {
			p.Warnf("still busy %s after SIGTERM; exiting", stopGrace)
			os.Exit(143)
		})
	}, syscall.SIGTERM)
	defer func() { pop(); cancel() }()
	args, code, done := helpArgs(args, stdout)
	if done {
		return code
	}
	parser, kctx, dir, exit, err := parseArgs(args, stdout, stderr)
	if exit >= 0 {
		return exit
	}
	if parser == nil {
		p.Error(err)
		return 1
	}
	if err != nil {
		p.Error(err)
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			p.Hintf("%s --help shows the usage", strings.TrimSpace("git sandbox "+commandPath(pe.Context)))
		}
		return usererr.ExitUsage
	}
	app := &App{Ctx: ctx, Stdin: stdin, Stdout: stdout, Stderr: stderr, UI: p, Dir: dir, Kong: parser}
	defer app.Close()
	if err := kctx.Run(app); err != nil {
		p.Error(err)
		return usererr.Code(err)
	}
	return 0
}

// parseArgs parses the command line, against kong's model of the one
// command it names when it can (internal/cliparse); __man prints the
// whole model. It returns the value of the global -C.
func parseArgs(args []string, stdout, stderr io.Writer) (parser *kong.Kong, kctx *kong.Context, dir string, exit int, err error) {
	var cli CLI
	parser, kctx, target, exit, err := cliparse.Parse(&cli, args, stdout, stderr, kongOptions, "__man")
	if target.IsValid() {
		dir = target.FieldByName("Dir").String()
	}
	return parser, kctx, dir, exit, err
}

// kongOptions configures the parser: its name, help, streams and where an
// exit (after help or the version) goes.
func kongOptions(stdout, stderr io.Writer, exit *int) []kong.Option {
	return []kong.Option{
		kong.Name("git sandbox"),
		kong.Description(description),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { *exit = code }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true, Summary: true}),
		kong.Help(helpWithExitStatus),
		helpVars(),
		networkVars(),
	}
}

// helpVars are the values help texts interpolate (${name} in a help tag),
// so they say what the code does: the agents are those registered.
func helpVars() kong.Vars {
	return kong.Vars{
		"agents":        orList(agent.Names()),
		"default_agent": config.Defaults().Agent,
		"default_image": config.DefaultImage(),
		"default_base":  config.DefaultBaseImage,
		"image_agents":  andList(agent.Installable()),
		"version":       versionLine(),
	}
}

// orList writes names as "a, b or c".
func orList(names []string) string { return joinLast(names, " or ") }

// andList writes names as "a, b and c".
func andList(names []string) string { return joinLast(names, " and ") }

func joinLast(names []string, last string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + last + names[len(names)-1]
}

func commandPath(ctx *kong.Context) string {
	if ctx == nil || ctx.Selected() == nil {
		return ""
	}
	return ctx.Selected().Path()
}

func helpWithExitStatus(options kong.HelpOptions, ctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
		return err
	}
	if ctx.Selected() == nil {
		fmt.Fprintln(ctx.Stdout)
		fmt.Fprintln(ctx.Stdout, exitStatusHelp)
	}
	return nil
}
