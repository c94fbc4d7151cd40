// Package agent holds the adapters that turn a task into an agent's command
// line. An adapter knows its agent's headless and interactive argv, where
// the agent keeps its login inside its home directory (which git sandbox
// persists per agent across sandboxes), and the hosts its CLI must reach. Adding an agent is one small file
// that calls register.
package agent

import (
	"sort"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Task is what the agent is asked to do.
type Task struct {
	// Prompt is the instruction; "" starts the agent interactively.
	Prompt string
	// Args are the words after "--" on the command line.
	Args []string
	// Terminal reports whether a terminal will be attached.
	Terminal bool
	// Continue asks the agent to go on with its previous conversation in
	// this sandbox (a follow-up task, or an interactive resume), where the
	// agent supports it.
	Continue bool
}

// Adapter is one agent.
type Adapter interface {
	// Name is what --agent selects.
	Name() string
	// Argv is the command the container runs.
	Argv(t Task) ([]string, error)
	// Interactive reports whether Argv(t) expects a person at a terminal.
	Interactive(t Task) bool
	// LoginPaths are the files and directories, relative to the agent's
	// home, that hold its login; they persist across sandboxes.
	LoginPaths() []string
	// Env is extra environment the agent needs inside the container.
	Env() []string
	// Hosts are the destinations the agent's CLI needs to work (its API,
	// its login), added to the allow list in allowlist mode with the
	// source "agent NAME". Entries are egress allow-list entries:
	// HOST[:PORT] or *.SUFFIX. Keep the list to what the CLI cannot work
	// without: every host on it is a way out for the agent.
	Hosts() []string
	// Package is the npm package that installs the agent's CLI into the
	// default image ("" when the agent needs nothing installed).
	Package() string
}

var adapters = map[string]Adapter{}

func register(a Adapter) { adapters[a.Name()] = a }

// Get returns the adapter called name.
func Get(name string) (Adapter, error) {
	a, ok := adapters[name]
	if !ok {
		return nil, usererr.New("unknown agent %q", name).
			Hint("choose one of: %s", strings.Join(Names(), ", "))
	}
	return a, nil
}

// Names lists the known agents.
func Names() []string {
	names := make([]string, 0, len(adapters))
	for n := range adapters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Installable lists the agents whose CLI the default image build installs,
// sorted.
func Installable() []string {
	var out []string
	for _, n := range Names() {
		if adapters[n].Package() != "" {
			out = append(out, n)
		}
	}
	return out
}

// Packages maps each installable agent to its npm package: what the
// default image build tries to install.
func Packages() map[string]string {
	out := map[string]string{}
	for _, n := range Installable() {
		out[n] = adapters[n].Package()
	}
	return out
}

// NeedTerminal is the error for an interactive agent started without a
// terminal and without -d.
func NeedTerminal(name string) error {
	return usererr.New("%s without a prompt is interactive and needs a terminal", name).
		Hint("give it a task with -p PROMPT, or run git sandbox start from a terminal (or with -d and attach later)")
}

// NeedsHost reports whether host is one the agent's CLI talks to: an entry
// of its Hosts, or a name in the same domain as one (api.anthropic.com
// puts every *.anthropic.com name there), so that a denial of it is worth
// a hint naming --allow.
func NeedsHost(a Adapter, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	for _, h := range a.Hosts() {
		h = strings.TrimPrefix(strings.ToLower(h), "*.")
		if i := strings.LastIndexByte(h, ':'); i >= 0 {
			h = h[:i]
		}
		if host == h {
			return true
		}
		labels := strings.Split(h, ".")
		if len(labels) >= 2 {
			domain := strings.Join(labels[len(labels)-2:], ".")
			if host == domain || strings.HasSuffix(host, "."+domain) {
				return true
			}
		}
	}
	return false
}
