package dash

import (
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress/held"
)

// A held connection shows at once above the footer, escaped, and its keys
// run the commands a user would type; an answered question is not shown
// again while the proxy catches up; keys of another mode answer nothing.
func TestHeldQuestion(t *testing.T) {
	m, ran := testModel(t, true)
	branch := m.list[1].Branch
	q := question{branch: branch, req: held.Request{ID: "q1", Host: "late.test", Port: 443, Kind: "connect", Entry: "late.test\x1b[2J",
		Since: time.Now(), Until: time.Now().Add(20 * time.Second), Count: 2}}
	m.Update(heldMsg{[]question{q}})
	v := m.View()
	if !strings.Contains(v, `HELD beta\x1b]0;pwn\x07 → late.test\x1b[2J (2, `) || strings.Contains(v, "\x1b[2J") {
		t.Fatalf("view:\n%q", v)
	}
	m.Update(key("x")) // rm asks
	m.Update(key("A")) // answers the question asked, not the held one
	if m.mode != modeList || len(m.held) != 1 {
		t.Fatalf("a key of the confirm mode answered the held question: mode %v, held %v", m.mode, m.held)
	}
	*ran = nil
	m.Update(key("A"))
	got := []string{}
	for _, r := range *ran {
		got = append(got, strings.Join(r, " "))
	}
	want := []string{" net allow --repo -- late.test\x1b[2J", " net allow -- " + branch + " late.test\x1b[2J"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("ran %q, want %q", got, want)
	}
	if len(m.held) != 0 || strings.Contains(m.View(), "HELD") {
		t.Fatalf("answered but still shown: %v", m.held)
	}
	m.Update(heldMsg{[]question{q}})
	if len(m.held) != 0 {
		t.Fatalf("an answered question came back: %v", m.held)
	}
	for k, args := range map[string]string{"o": "net allow --once -- " + branch + " b.test", "a": "net allow -- " + branch + " b.test", "D": "net deny -- " + branch + " b.test"} {
		*ran = nil
		m.Update(heldMsg{[]question{{branch: branch, req: held.Request{ID: "q-" + k, Entry: "b.test", Until: time.Now().Add(time.Minute)}}}})
		m.Update(key(k))
		if len(*ran) != 1 || strings.Join((*ran)[0][1:], " ") != args {
			t.Errorf("%s ran %q", k, *ran)
		}
	}
}
