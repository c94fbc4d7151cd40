package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/alecthomas/kong"

	"github.com/git-sandbox/git-sandbox/internal/version"
)

// ManCmd prints the man page, generated from the command line definition
// so it never drifts from --help. make install writes it to man1/.
type ManCmd struct{}

// Run prints the page.
func (c *ManCmd) Run(app *App) error {
	writeMan(app.Stdout, app.Kong.Model)
	return nil
}

func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, ".") || strings.HasPrefix(line, "'") {
			line = `\&` + line
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func writeMan(w io.Writer, app *kong.Application) {
	fmt.Fprintf(w, ".TH GIT-SANDBOX 1 %q %q \"Git Manual\"\n", time.Now().UTC().Format("2006-01-02"), "git-sandbox "+version.String())
	fmt.Fprintln(w, ".SH NAME")
	fmt.Fprintln(w, `git\-sandbox \- run an AI coding agent in a container on its own worktree, then land its work`)
	fmt.Fprintln(w, ".SH SYNOPSIS")
	fmt.Fprintln(w, ".B git sandbox")
	fmt.Fprintln(w, `[\-C \fIPATH\fR] \fICOMMAND\fR [\fIARGS\fR]`)
	fmt.Fprintln(w, ".SH DESCRIPTION")
	fmt.Fprintln(w, roff(description))
	fmt.Fprintln(w, ".SH COMMANDS")
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, child := range n.Children {
			if child.Hidden {
				continue
			}
			if len(child.Children) > 0 && child.DefaultCmd == nil && !hasRun(child) {
				walk(child)
				continue
			}
			fmt.Fprintf(w, ".SS \"git sandbox %s\"\n", roff(child.Summary()))
			fmt.Fprintln(w, roff(child.Help))
			if child.Detail != "" {
				fmt.Fprintln(w, ".PP")
				fmt.Fprintln(w, ".nf")
				fmt.Fprintln(w, roff(child.Detail))
				fmt.Fprintln(w, ".fi")
			}
			for _, f := range child.Flags {
				if f.Hidden {
					continue
				}
				fmt.Fprintln(w, ".TP")
				name := `\-\-` + roff(f.Name)
				if f.Short != 0 {
					name = fmt.Sprintf(`\-%c, %s`, f.Short, name)
				}
				if !f.IsBool() {
					name += ` \fI` + roff(f.FormatPlaceHolder()) + `\fR`
				}
				fmt.Fprintf(w, ".B %s\n", name)
				fmt.Fprintln(w, roff(f.Help))
			}
			walk(child)
		}
	}
	walk(app.Node)
	fmt.Fprintln(w, ".SH EXIT STATUS")
	fmt.Fprintln(w, ".nf")
	fmt.Fprintln(w, roff(strings.TrimPrefix(exitStatusHelp, "EXIT STATUS\n")))
	fmt.Fprintln(w, ".fi")
	fmt.Fprintln(w, ".SH FILES")
	fmt.Fprintln(w, roff(`~/.config/git-sandbox/config.toml: your own (trusted) settings.
.sandbox.toml in a repository: its (untrusted) settings; it may choose the agent, image, setup and verify commands, the setup inputs that key a warm image and caches of its own, and only tighten limits.
~/.local/state/git-sandbox/: each sandbox's worktree, agent repository, record and snapshot index; agents/ holds each agent's home.`))
	fmt.Fprintln(w, ".SH ENVIRONMENT")
	fmt.Fprintln(w, roff(`DOCKER_HOST selects the Docker daemon new sandboxes run on unless --engine or default_engine names one of the [[engine]] entries of the user config; a sandbox always goes back to the engine it was started on. GIT_SANDBOX_SSH names the ssh program used for an ssh:// engine (default ssh). XDG_STATE_HOME and XDG_CONFIG_HOME move the state and config directories; GIT_SANDBOX_STATE_DIR and GIT_SANDBOX_CONFIG name them directly. NO_COLOR turns colour off. GIT_SANDBOX_TRACE=1 prints each git command the tool runs and each request to a Kubernetes engine's API server, with its time, each step of a start with its time, and each pause of an agent during a snapshot. GIT_SANDBOX_DEFAULT_IMAGE gives the default image another name than git-sandbox:latest; it is meant for test suites and packagers.`))
	fmt.Fprintln(w, ".SH SEE ALSO")
	fmt.Fprintln(w, `\fBgit-worktree\fR(1), \fBdocker\fR(1)`)
}

func hasRun(n *kong.Node) bool {
	_, ok := n.Target.Addr().Interface().(interface{ Run(*App) error })
	return ok
}
