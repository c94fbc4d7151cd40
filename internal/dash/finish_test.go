package dash

import (
	"errors"
	"strings"
	"testing"
)

// TestFinish: an action's output is escaped line by line, so a page or a
// failure of several lines shows as lines, and the last line of a success
// is its outcome.
func TestFinish(t *testing.T) {
	tests := []struct {
		name   string
		d      doneMsg
		status string
		page   []string
	}{
		{"done, silent", doneMsg{args: []string{"stop", "--", "b1"}}, "stop b1: done", nil},
		{"done, last line shown", doneMsg{args: []string{"update", "--", "b1"}, output: "merging\nupdated b1\n"}, "update b1: updated b1", nil},
		{"failed, one line", doneMsg{args: []string{"rm", "--", "b1"}, output: "refused\x1b[2J\n", err: errors.New("exit 1")}, `rm b1: refused\x1b[2J`, nil},
		{"failed, no output", doneMsg{args: []string{"stop", "--", "b1"}, err: errors.New("exit status 2")}, "stop b1: exit status 2", nil},
		{"failed, several lines", doneMsg{args: []string{"land", "--expect", "t", "--", "b1"}, output: "error: moved\nhint: try again\n", err: errors.New("x")}, "", []string{"error: moved", "hint: try again"}},
		{"a page", doneMsg{args: []string{"rescue", "list"}, output: "s1\ns2\n", page: true}, "", []string{"s1", "s2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := testModel(t, true)
			m.finish(tt.d)
			if tt.page != nil {
				if m.mode != modeText || strings.Join(m.text, "|") != strings.Join(tt.page, "|") {
					t.Errorf("mode %v text %q, want the page %q", m.mode, m.text, tt.page)
				}
				return
			}
			if m.mode != modeList || m.status != tt.status {
				t.Errorf("mode %v status %q, want %q", m.mode, m.status, tt.status)
			}
		})
	}
}

// TestPageTitleIsEscaped: the page's title names the command with its
// branch, which the agent may have chosen.
func TestPageTitleIsEscaped(t *testing.T) {
	m, _ := testModel(t, true)
	m.finish(doneMsg{args: []string{"rescue", "list", "--", "b\u202eexe"}, output: "s1\n", page: true})
	if strings.Contains(m.textTitle, "\u202e") || !strings.Contains(m.textTitle, `b\u202eexe`) {
		t.Errorf("title %q", m.textTitle)
	}
	if v := m.View(); strings.Contains(v, "\u202e") {
		t.Errorf("the view carries a bidi override:\n%q", v)
	}
}
