package main

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/netprobe"
	"github.com/git-sandbox/git-sandbox/internal/portfwd"
	"github.com/git-sandbox/git-sandbox/internal/sigstack"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// ProxyCmd runs a sandbox's egress proxy. start runs it as the entrypoint
// of the sandbox's proxy container, an image holding this binary alone; it
// serves until SIGTERM or SIGINT. With --forward it also carries the
// sandbox's published ports to the agent (internal/portfwd).
type ProxyCmd struct {
	Config  string `required:"" placeholder:"FILE" help:"The proxy's configuration (JSON, mode 0600)."`
	Forward string `placeholder:"FILE" help:"The published ports to carry to the agent (JSON)."`
}

// Run serves until the process is told to stop. The proxy's Go code runs
// on one core at a time (GOMAXPROCS 1, unless its environment says
// otherwise). Its container may use one core, but Go takes no fewer than
// two from a CPU limit; the kernel moves a tunnel's bulk bytes; and with
// a second core the runtime wakes a sleeping thread for every goroutine
// it starts or readies, which cost each new tunnel some 60 us, more than
// all that squid adds to one. The runtime's monitor thread does not
// preempt the proxy's when it wakes (egress.QuietMonitor).
func (c *ProxyCmd) Run(app *App) error {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	egress.QuietMonitor()
	cfg, err := egress.LoadConfig(c.Config)
	if err != nil {
		return err
	}
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt)
	defer stop()
	if c.Forward != "" {
		if err := portfwd.Start(ctx, c.Forward, app.Stderr); err != nil {
			return err
		}
	}
	return egress.Run(ctx, cfg, app.Stderr, func(a net.Addr) {
		app.UI.Infof("proxy listening on %s", a)
	})
}

// ProxyLoadCmd loads a copy-mode proxy's configuration into its volumes:
// start runs it in the proxy's own image, with the configuration as a tar
// on stdin.
type ProxyLoadCmd struct {
	ConfigDir string `required:"" placeholder:"DIR" help:"Where the configuration's files go."`
	LogDir    string `required:"" placeholder:"DIR" help:"The decision log's directory, opened to the proxy's user."`
}

// Run reads the tar and writes its files.
func (c *ProxyLoadCmd) Run(app *App) error {
	return egress.LoadConfigFiles(app.Stdin, c.ConfigDir, c.LogDir)
}

// ProxyHeldCmd prints the questions a copy-mode proxy holds, from its
// held requests' file: the supervisor on the host runs it in the proxy's
// container and keeps a copy where git sandbox dash and net pending read.
type ProxyHeldCmd struct {
	File string `arg:"" help:"The proxy's held requests' file."`
}

// Run prints the questions still waiting, as the file writes them.
func (c *ProxyHeldCmd) Run(app *App) error {
	qs, err := held.Read(c.File, time.Now())
	if err != nil {
		return err
	}
	if qs == nil {
		qs = []held.Request{}
	}
	return termsafe.NewJSONEncoder(app.Stdout).Encode(struct {
		Requests []held.Request `json:"requests"`
	}{qs})
}

// ProxyLogCmd prints a copy-mode proxy's decision log from an offset (as
// egress.TailLog writes it): the supervisor on the host runs it in the
// proxy's container and appends what it prints to the sandbox's log here.
type ProxyLogCmd struct {
	File string `arg:"" help:"The proxy's decision log."`
	From int64  `help:"The offset to start from." default:"0"`
	Max  int64  `help:"The most bytes to print." default:"4194304"`
}

// Run prints the log's new records.
func (c *ProxyLogCmd) Run(app *App) error {
	return egress.TailLog(app.Stdout, c.File, c.From, c.Max)
}

// NetProbeCmd is one end of the probe by which a Kubernetes engine finds
// out whether its cluster enforces NetworkPolicy (container/kube): with
// --listen it accepts connections until stopped; with --connect it tries
// to reach the listener and says by its exit code whether it could
// (netprobe.ExitConnected) or was blocked (netprobe.ExitBlocked).
type NetProbeCmd struct {
	Listen  string        `xor:"end" placeholder:"ADDR" help:"Accept connections on ADDR (:PORT)."`
	Connect string        `xor:"end" placeholder:"HOST:PORT" help:"Try to connect to HOST:PORT."`
	Window  time.Duration `default:"5s" help:"How long the tries go on while they connect."`
}

// Run runs the end asked for.
func (c *NetProbeCmd) Run(app *App) error {
	ctx, stop := sigstack.NotifyContext(app.Ctx, os.Interrupt)
	defer stop()
	switch {
	case c.Listen != "":
		return netprobe.Listen(ctx, c.Listen)
	case c.Connect != "":
		connected, open := netprobe.Reach(ctx, c.Connect, c.Window, 2*time.Second)
		if connected {
			fmt.Fprintf(app.Stdout, "connected to %s for %s\n", c.Connect, open.Round(time.Millisecond))
			return usererr.ExitStatus(netprobe.ExitConnected)
		}
		fmt.Fprintln(app.Stdout, netprobe.BlockedLine(c.Connect, open))
		return usererr.ExitStatus(netprobe.ExitBlocked)
	}
	return usererr.New("__netprobe needs --listen or --connect")
}
