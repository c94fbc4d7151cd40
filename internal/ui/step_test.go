package ui

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Off a terminal a step is two quiet lines: when it begins and what it
// made, with the time it took; nothing is redrawn.
func TestStepOffATerminal(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, Options{NoColor: true})
	s := p.Step("keeping %s", "img\x1b[2J")
	s.Done("kept %s", "img")
	out := b.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 || lines[0] != `git sandbox: keeping img\x1b[2J` || !strings.HasPrefix(lines[1], "git sandbox: kept img (") || strings.Contains(out, "\r") {
		t.Errorf("output = %q", out)
	}
	b.Reset()
	p.Step("failing").Fail()
	if b.String() != "git sandbox: failing\n" {
		t.Errorf("a failed step printed %q", b.String())
	}
}

func TestElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{400 * time.Millisecond: "0.4s", 12 * time.Second: "12s", 125 * time.Second: "2m05s"} {
		if got := elapsed(d); got != want {
			t.Errorf("elapsed(%v) = %q, want %q", d, got, want)
		}
	}
}
