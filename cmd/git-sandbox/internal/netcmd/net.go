// Package netcmd is git sandbox net: a sandbox's egress log and policy,
// live changes to it, held connections, and suggestions from a run
// (internal/network and internal/egress do the work).
package netcmd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/cmd/git-sandbox/internal/cliapp"
	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/netlog"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// NetCmd is git sandbox net: the decision log (net BRANCH, the default),
// live changes to the allow list and a suggested one.
type NetCmd struct {
	Show    NetShowCmd    `cmd:"" default:"withargs" help:"Show what a sandbox's agent reached and was denied (the default: git sandbox net BRANCH)."`
	Allow   NetAllowCmd   `cmd:"" help:"Allow hosts on a sandbox's proxy now, without restarting its agent."`
	Deny    NetDenyCmd    `cmd:"" help:"Deny hosts on a sandbox's proxy now, whoever allowed them."`
	Suggest NetSuggestCmd `cmd:"" help:"Print the smallest allow list the logs of sandboxes needed (TOML)."`
	Pending NetPendingCmd `cmd:"" help:"List the connections held for your answer (network_prompt)."`
}

// NetShowCmd is git sandbox net [show] BRANCH.
type NetShowCmd struct {
	Branch string `arg:"" help:"The sandbox."`
	JSON   bool   `help:"Print the decision log as it is: one JSON object a line (with --policy: the list)."`
	Follow bool   `short:"f" help:"Print every decision as a line, and keep printing new ones until interrupted."`
	Policy bool   `help:"Print the sandbox's effective allow list, with where each entry came from."`
}

// Help is net's long help.
func (c *NetShowCmd) Help() string {
	return `Shows what the sandbox's agent tried to reach through its egress proxy
(network = "allowlist"): the hosts it was allowed and denied, how often, and
how many bytes went each way. Host names come from the agent and are shown
escaped.

--json prints the decision log itself: one JSON object a line, with the time,
kind (connect, http, intercept), host, port, decision (allowed, denied, leak,
or policy for a live change), reason, status and bytes. -f prints each
decision as it is made.

--policy prints the allow list the sandbox's proxy applies, each entry with
its source: the agent's adapter, a secret, your config, --allow, the
repository's deny list, or a live change (git sandbox net allow, deny).

A host the agent needs and was denied is allowed at once with git sandbox
net allow BRANCH HOST[:PORT], for a new sandbox with --allow HOST[:PORT] on
start, or for every sandbox with allow = ["HOST"] in your config.`
}

// Run prints the log.
func (c *NetShowCmd) Run(app *cliapp.App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	name := termsafe.String(c.Branch)
	if sb.Egress == nil {
		network := sb.Network()
		if network == "" {
			network = container.NetworkOpen // made before modes were recorded
		}
		return usererr.New("sandbox %s has no egress proxy: its network is %s", name, network).
			Hint("the decision log exists in allowlist mode, the default for new sandboxes")
	}
	if c.Policy {
		return printPolicy(app, sb.Record, c.JSON)
	}
	path := sb.NetLog()
	if c.Follow || c.JSON {
		return followLog(app, path, c.JSON, c.Follow)
	}
	s, err := netlog.SummarizeFile(path)
	if err != nil {
		return err
	}
	if len(s.Hosts) == 0 {
		app.UI.Infof("%s has reached for nothing yet", name)
		return nil
	}
	cliapp.Table(app.Stdout, netRows(s))
	fmt.Fprintf(app.Stdout, "%d allowed, %d denied, %d leaks\n", s.Allowed, s.Denied, s.Leaks)
	if d := sb.CLIDenials(); len(d) > 0 {
		network.HintCLIDenials(app.UI, d)
	} else if s.Denied > 0 {
		app.UI.Hintf("git sandbox net allow %s HOST[:PORT] lets a needed host through at once", name)
	}
	return nil
}

// netRows is net's table: each host, its decisions and why — a denial's
// reason, or for an allowed host whose connections failed how many and
// the newest one's cause (the agent got a 502 from the proxy).
func netRows(s netlog.Summary) [][]string {
	rows := [][]string{{"HOST", "PORT", "ALLOWED", "DENIED", "UP", "DOWN", "REASON"}}
	for _, h := range s.Hosts {
		denied := strconv.Itoa(h.Denied)
		if h.Leaks > 0 {
			denied += fmt.Sprintf(" (%d leaks)", h.Leaks)
		}
		reason := h.Reason
		if f := h.Failure(); f != "" {
			reason = strings.TrimPrefix(reason+"; "+f, "; ")
		}
		rows = append(rows, []string{
			termsafe.String(h.Host), strconv.Itoa(int(h.Port)), strconv.Itoa(h.Allowed), denied,
			strconv.FormatInt(h.BytesUp, 10), strconv.FormatInt(h.BytesDown, 10), termsafe.String(reason),
		})
	}
	return rows
}

// followLog prints the log's records (raw lines with asJSON) and, with
// follow, keeps printing new ones until the command is interrupted.
func followLog(app *cliapp.App, path string, asJSON, follow bool) error {
	// The proxy rotates its log (egress.PreviousGeneration): the older
	// generation first, then the current file, started again from its
	// beginning whenever it is a new file.
	if _, err := printFrom(app.Stdout, egress.PreviousGeneration(path), 0, asJSON); err != nil {
		return err
	}
	var off int64
	var cur os.FileInfo
	for {
		if fi, err := os.Stat(path); err == nil {
			if cur != nil && !os.SameFile(cur, fi) {
				off = 0
			}
			cur = fi
		}
		n, err := printFrom(app.Stdout, path, off, asJSON)
		if err != nil {
			return err
		}
		off = n
		if !follow {
			return nil
		}
		select {
		case <-app.Ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// printFrom prints the whole lines of the log after offset and returns the
// offset after the last one.
func printFrom(w io.Writer, path string, off int64, asJSON bool) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return off, nil
	}
	if err != nil {
		return off, fmt.Errorf("read egress log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off, fmt.Errorf("read egress log: %w", err)
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			// A line the proxy is still writing waits for the next round.
			return off, nil
		}
		off += int64(len(line))
		var rec egress.Record
		if json.Unmarshal(line, &rec) != nil || rec.Decision == "" {
			continue
		}
		if asJSON {
			// As it is, but in one line and escaped (a log written by an
			// older proxy, or by hand, may hold raw controls).
			var b bytes.Buffer
			if json.Compact(&b, line) != nil {
				continue
			}
			if _, err := w.Write(append(termsafe.JSON(b.Bytes()), '\n')); err != nil {
				return off, err
			}
			continue
		}
		fmt.Fprintln(w, formatRecord(rec))
	}
}

// formatRecord is one decision as a line of text.
func formatRecord(r egress.Record) string {
	s := fmt.Sprintf("%s %-7s %-9s %s:%d", r.Time.Local().Format(time.TimeOnly), r.Decision, r.Kind, termsafe.String(r.Host), r.Port)
	if r.Method != "" {
		s += " " + termsafe.String(r.Method)
	}
	if r.Status != 0 {
		s += fmt.Sprintf(" status %d", r.Status)
	}
	if r.BytesUp != 0 || r.BytesDown != 0 {
		s += fmt.Sprintf(" up %d down %d", r.BytesUp, r.BytesDown)
	}
	if r.Decision == egress.PolicyChange {
		return fmt.Sprintf("%s policy  %-9s %s (%s)", r.Time.Local().Format(time.TimeOnly), r.Kind, termsafe.String(r.Host), termsafe.String(r.Reason))
	}
	if r.Reason != "" {
		s += ": " + termsafe.String(r.Reason)
	}
	if r.Error != "" {
		s += ": " + termsafe.String(r.Error)
	}
	return s
}
