package dash

// Held connections (network_prompt): the dashboard looks at the sandboxes'
// held requests every half second and shows the oldest question on the
// line above the footer, with keys that answer it through the same
// commands a user would type (git sandbox net allow, net deny).

import (
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// heldEvery is how often the held requests are read.
var heldEvery = 500 * time.Millisecond

// question is a held request of one sandbox.
type question struct {
	branch string
	req    held.Request
}

type (
	heldTickMsg struct{}
	heldMsg     struct{ qs []question }
)

func (m *model) heldTick() tea.Cmd {
	if m.o.Held == nil {
		return nil
	}
	return tea.Tick(heldEvery, func(time.Time) tea.Msg { return heldTickMsg{} })
}

// loadHeld reads the held requests of the allowlist sandboxes listed.
func (m *model) loadHeld() tea.Cmd {
	var branches []string
	for _, s := range m.list {
		if s.Network == "allowlist" {
			branches = append(branches, s.Branch)
		}
	}
	read := m.o.Held
	return func() tea.Msg {
		var qs []question
		for _, b := range branches {
			reqs, err := read(b)
			if err != nil {
				continue // a file the proxy is writing; the next look reads it
			}
			for _, r := range reqs {
				qs = append(qs, question{branch: b, req: r})
			}
		}
		return heldMsg{qs}
	}
}

// answered are the questions answered, not to be shown again while the
// proxy has not yet seen the answer.
func (m *model) showHeld(qs []question) {
	var out []question
	for _, q := range qs {
		if !m.answered[q.req.ID] {
			out = append(out, q)
		}
	}
	m.held = out
}

// heldKey answers the oldest question with o (allow once), a (allow for
// the sandbox), A (allow for the repository, and this sandbox now) or D
// (deny); ok is false for any other key.
func (m *model) heldKey(key string) (tea.Cmd, bool) {
	if len(m.held) == 0 {
		return nil, false
	}
	q := m.held[0]
	b, entry := q.branch, q.req.Entry
	var cmds []tea.Cmd
	switch key {
	case "o":
		cmds = append(cmds, m.run([]string{"net", "allow", "--once", "--", b, entry}, false))
	case "a":
		cmds = append(cmds, m.run([]string{"net", "allow", "--", b, entry}, false))
	case "A":
		cmds = append(cmds, m.run([]string{"net", "allow", "--repo", "--", entry}, false), m.run([]string{"net", "allow", "--", b, entry}, false))
	case "D":
		cmds = append(cmds, m.run([]string{"net", "deny", "--", b, entry}, false))
	default:
		return nil, false
	}
	if m.answered == nil {
		m.answered = map[string]bool{}
	}
	m.answered[q.req.ID] = true
	m.held = m.held[1:]
	m.status = "git sandbox net … " + termsafe.String(entry) + " for " + termsafe.String(b) + " …"
	return tea.Sequence(cmds...), true
}

// heldLine is the oldest question and its keys.
func (m *model) heldLine() string {
	q := m.held[0]
	left := max(0, int(time.Until(q.req.Until).Seconds()))
	s := fmt.Sprintf("HELD %s → %s (%d, %ds)  o once  a sandbox  A repo  D deny",
		termsafe.String(q.branch), termsafe.String(q.req.Entry), q.req.Count, left)
	if n := len(m.held) - 1; n > 0 {
		s += fmt.Sprintf("  +%d", n)
	}
	return s
}
