package status

import (
	"errors"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// Each answer of an engine is one state, and an exited container keeps
// its exit code.
func TestSetState(t *testing.T) {
	code := 3
	for _, c := range []struct {
		c              container.State
		ok             bool
		err            error
		named, stopped bool
		want           string
	}{
		{err: errors.New("refused"), named: true, want: Unreachable},
		{err: errors.New("refused"), want: Unknown},
		{want: Missing},
		{c: container.State{Status: container.StatusLost}, ok: true, want: Lost},
		{c: container.State{Running: true}, ok: true, want: Running},
		{c: container.State{Status: "paused"}, ok: true, want: Paused},
		{c: container.State{Status: "created"}, ok: true, want: Created},
		{c: container.State{Status: "exited", ListExitCode: &code}, ok: true, want: Exited},
		{c: container.State{Status: "exited"}, ok: true, stopped: true, want: Stopped},
	} {
		var r Row
		r.SetState(c.c, c.ok, c.err, c.named, c.stopped)
		if r.State != c.want {
			t.Errorf("%+v: state %q, want %q", c, r.State, c.want)
		}
		if c.want == Exited && (r.ExitCode == nil || *r.ExitCode != 3) {
			t.Errorf("exited: exit code %v, want 3", r.ExitCode)
		}
		if c.want == Unreachable && r.EngineError != "refused" {
			t.Errorf("unreachable: engine error %q", r.EngineError)
		}
	}
}

func TestVerdict(t *testing.T) {
	v := map[string]record.Verdict{"t1": {OK: true}, "t2": {OK: false}}
	for _, c := range []struct {
		verify string
		v      map[string]record.Verdict
		tree   string
		want   string
	}{
		{"", v, "t1", ""},
		{"make", v, "t1", "passed"},
		{"make", v, "t2", "failed"},
		{"make", v, "t3", "stale"},
		{"make", nil, "t1", "none"},
		{"make", v, "", "stale"},
	} {
		if got := Verdict(c.verify, c.v, c.tree); got != c.want {
			t.Errorf("Verdict(%q, %v, %q) = %q, want %q", c.verify, c.v, c.tree, got, c.want)
		}
	}
}
