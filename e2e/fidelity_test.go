package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// parsedTrailers is what git interpret-trailers --parse finds in a
// commit's message.
func (e *Env) parsedTrailers(rev string) string {
	e.t.Helper()
	r := e.Run(e.Repo, nil, "sh", "-c", `git log -1 --format=%B "$1" | git interpret-trailers --parse`, "sh", rev)
	if r.Code != 0 {
		e.t.Fatalf("interpret-trailers: %s", r)
	}
	return r.Stdout
}

// The sandbox trailers join the message's own trailer block, so a DCO
// check still finds Signed-off-by; a forced land says so in a trailer.
func TestLandTrailersJoinTheMessagesTrailerBlock(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--verify", "test -f ok.txt", "--agent", "shell", "--", "sh", "-c", `echo work > work.txt`)
	msg := "feat: add work\n\nThe body.\n\nSigned-off-by: Test User <test@example.com>"
	if r := e.Sandbox("land", "t1", "-m", msg); r.Code != 4 {
		t.Fatalf("land after a failed verify: %s", r)
	}
	e.MustSandbox("land", "t1", "--force", "-m", msg)
	got := e.parsedTrailers("main")
	p := "Signed-off-by: Test User <test@example.com>\nSandbox: t1\nSandbox-Agent: shell\n"
	if !strings.HasPrefix(got, p) || !strings.Contains(got, "\nSandbox-Forced: verify failed\n") {
		t.Errorf("git interpret-trailers --parse of the landed commit:\n%s\nwant Signed-off-by, the sandbox trailers and Sandbox-Forced together", got)
	}
	if subj := e.Git("log", "-1", "--format=%s", "main"); subj != "feat: add work" {
		t.Errorf("subject = %q", subj)
	}

	// A subject-only message that looks like a trailer keeps its subject.
	e.MustSandbox("start", "t2", "--agent", "shell", "--", "sh", "-c", `echo more > more.txt`)
	e.MustSandbox("land", "t2", "-m", "fix: more")
	if subj := e.Git("log", "-1", "--format=%s", "main"); subj != "fix: more" {
		t.Errorf("subject = %q", subj)
	}
	if got := e.parsedTrailers("main"); !strings.HasPrefix(got, "Sandbox: t2\n") || strings.Contains(got, "Sandbox-Forced") {
		t.Errorf("trailers of a plain land:\n%s", got)
	}
}

// A file of the checkout whose stat data changed but not its content
// (touch) does not stop the checkout from following the land.
func TestLandAfterTouchInTheCheckout(t *testing.T) {
	t.Parallel()
	e := NewEnv(t)
	e.MustSandbox("start", "t1", "--agent", "shell", "--", "sh", "-c", `echo changed > README.md`)
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(e.Repo, "README.md"), later, later))
	e.MustSandbox("land", "t1")
	if st := e.Git("status", "--porcelain"); st != "" {
		t.Errorf("checkout not clean after land:\n%s", st)
	}
	if got := readFile(filepath.Join(e.Repo, "README.md")); got != "changed\n" {
		t.Errorf("README.md = %q", got)
	}
}
