package ui

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestMessages(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, Options{})
	p.Infof("landed %s on %s", "t1", "main")
	p.Warnf("final snapshot failed: %v", errors.New("disk full"))
	p.Hintf("git sandbox rescue list %s shows them", "t1")
	want := "git sandbox: landed t1 on main\n" +
		"git sandbox: warning: final snapshot failed: disk full\n" +
		"hint: git sandbox rescue list t1 shows them\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestMessagesNeverCarryEscapes: whatever a caller forgets to escape, no
// escape sequence reaches the terminal through a message.
func TestMessagesNeverCarryEscapes(t *testing.T) {
	var b bytes.Buffer
	p := New(&b, Options{Trace: true})
	evil := "x\x1b]52;c;aGk=\x07\x1b[2J"
	p.Infof("verifying: %s", evil)
	p.Warnf("%s", evil)
	p.Hintf("%s", evil)
	p.Tracef("%s", evil)
	p.Error(errors.New(evil))
	p.Error(usererr.New("%s", evil).Hint("%s", evil))
	if bytes.ContainsAny(b.Bytes(), "\x1b\x07") {
		t.Errorf("an escape sequence got through:\n%q", b.String())
	}
}

func TestError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("create worktree: exit status 128"), "git sandbox: error: create worktree: exit status 128\n"},
		{usererr.New("no sandbox t1 in this repository").Hint("git sandbox ps lists them").Hint("or start one"),
			"git sandbox: error: no sandbox t1 in this repository\nhint: git sandbox ps lists them\nhint: or start one\n"},
		{fmt.Errorf("land: %w", usererr.New("conflict").Hint("resolve it")), "git sandbox: error: conflict\nhint: resolve it\n"},
		{usererr.ExitStatus(3), ""},
	} {
		var b bytes.Buffer
		New(&b, Options{}).Error(tc.err)
		if b.String() != tc.want {
			t.Errorf("Error(%v) printed %q, want %q", tc.err, b.String(), tc.want)
		}
	}
}

func TestTrace(t *testing.T) {
	var b bytes.Buffer
	New(&b, Options{}).Tracef("git %s", "status")
	if b.Len() != 0 {
		t.Errorf("trace printed while off: %q", b.String())
	}
	p := New(&b, Options{Trace: true})
	p.Tracef("git %s", "status")
	if b.String() != "trace: git status\n" || !p.Tracing() {
		t.Errorf("trace on: %q", b.String())
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	t.Setenv("GIT_SANDBOX_TRACE", "1")
	p := FromEnv(nil)
	if !p.opts.NoColor {
		t.Error("NO_COLOR set (even empty) must turn colour off")
	}
	if !p.Tracing() {
		t.Error("GIT_SANDBOX_TRACE=1 must turn tracing on")
	}
	os.Unsetenv("NO_COLOR")
	t.Setenv("GIT_SANDBOX_TRACE", "")
	p = FromEnv(nil)
	if p.opts.NoColor || p.Tracing() {
		t.Errorf("options from a clean environment: %+v", p.opts)
	}
}

func TestColorOnlyOnATerminal(t *testing.T) {
	var b bytes.Buffer
	if New(nil, Options{}).Color(&b) {
		t.Error("colour on a buffer")
	}
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err != nil {
		return // no controlling terminal here: the buffer case above is the check
	}
	defer tty.Close()
	if !New(nil, Options{}).Color(tty) {
		t.Error("no colour on a terminal")
	}
	if New(nil, Options{NoColor: true}).Color(tty) {
		t.Error("colour on a terminal with NO_COLOR")
	}
}
