package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/rescue"
)

func landOpts() land.Request {
	var out bytes.Buffer
	return land.Request{Message: "land it", Out: &out}
}

// finished starts a sandbox, lets its agent change lib.txt's first line
// and exit.
func (te *testEnv) finished(branch string) *Sandbox {
	te.t.Helper()
	sb := te.start(branch)
	te.writeIn(sb.Worktree, "lib.txt", "ONE\ntwo\nthree\n")
	te.fake.Exit(sb.Container, 0)
	return te.find(branch)
}

// onVerify makes every verify container run fn, then exit with code.
func (te *testEnv) onVerify(code int, fn func()) *int {
	runs := new(int)
	te.fake.OnStart = func(c enginefake.Container) (int, bool) {
		if c.Spec.Labels[container.LabelRole] != container.RoleVerify {
			return 0, false
		}
		*runs++
		if fn != nil {
			fn()
		}
		return code, true
	}
	return runs
}

func TestLandOneCommitAndCleanUp(t *testing.T) {
	te := newTestEnv(t)
	sb := te.finished("t1")
	tip := te.git("rev-parse", "main")
	res, err := land.Land(context.Background(), sb, landOpts())
	if err != nil {
		t.Fatal(err)
	}
	if got := te.git("rev-parse", "main"); got != res.Commit.String() {
		t.Errorf("main at %s, want the landed commit %s", got, res.Commit)
	}
	if parent := te.git("rev-parse", res.Commit.String()+"^"); parent != tip {
		t.Errorf("landed on %s, want %s", parent, tip)
	}
	if msg := te.git("log", "-1", "--format=%B", res.Commit.String()); !strings.HasPrefix(msg, "land it") || !strings.Contains(msg, "Sandbox: t1") {
		t.Errorf("message = %q", msg)
	}
	// The checkout of main followed.
	if b, _ := os.ReadFile(filepath.Join(te.repo, "lib.txt")); string(b) != "ONE\ntwo\nthree\n" {
		t.Errorf("checkout lib.txt = %q", b)
	}
	if !res.Cleaned {
		t.Error("not cleaned up")
	}
	te.assertNothingLeft("t1", true)
}

func TestLandRefusals(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	if _, err := land.Land(context.Background(), sb, landOpts()); usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "still running") {
		t.Errorf("land of a running sandbox: %v", err)
	}
	te.fake.Exit(sb.Container, 0)
	o := landOpts()
	o.Merge = true
	if _, err := land.Land(context.Background(), te.find("t1"), o); err == nil || !strings.Contains(err.Error(), "no commits") {
		t.Errorf("--merge without agent commits: %v", err)
	}
	// Nothing to land: empty, and the sandbox stays.
	res, err := land.Land(context.Background(), te.find("t1"), landOpts())
	if err != nil || !res.Plan.Empty || res.Commit != "" {
		t.Errorf("empty land = %+v, %v", res, err)
	}
	if _, err := os.Stat(sb.Worktree); err != nil {
		t.Error("an empty land removed the sandbox")
	}
}

func TestLandKeepMovesTheBaseline(t *testing.T) {
	te := newTestEnv(t)
	sb := te.finished("t1")
	o := landOpts()
	o.Keep = true
	res, err := land.Land(context.Background(), sb, o)
	if err != nil {
		t.Fatal(err)
	}
	rec := te.find("t1")
	if rec.Baseline != res.Final.ID || rec.BaseTip != res.Commit.String() {
		t.Errorf("record baseline %s tip %s, want %s %s", rec.Baseline, rec.BaseTip, res.Final.ID, res.Commit)
	}
	// Nothing unlanded any more: rm goes through without --force.
	if _, err := rec.Remove(context.Background(), RemoveOptions{}); err != nil {
		t.Errorf("rm after land --keep: %v", err)
	}
}

func TestLandRunsVerifyFirst(t *testing.T) {
	te := newTestEnv(t)
	te.env.Config.Verify = "make check"
	sb := te.finished("t1")
	runs := te.onVerify(1, nil)
	_, err := land.Land(context.Background(), sb, landOpts())
	if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "verify failed") {
		t.Fatalf("land with failing verify: %v", err)
	}
	if *runs != 1 {
		t.Errorf("verify ran %d times", *runs)
	}
	// The verdict is kept: land again refuses without running verify.
	_, err = land.Land(context.Background(), te.find("t1"), landOpts())
	if usererr.Code(err) != usererr.ExitRefused || *runs != 1 {
		t.Errorf("second land: %v after %d verify runs", err, *runs)
	}
	// --force lands anyway.
	o := landOpts()
	o.Force = true
	if res, err := land.Land(context.Background(), te.find("t1"), o); err != nil || res.Commit == "" {
		t.Errorf("land --force = %+v, %v", res, err)
	}
	// Verify containers are gone.
	for _, c := range te.fake.Containers() {
		if c.Spec.Labels[container.LabelRole] == container.RoleVerify {
			t.Errorf("verify container %s left", c.Name)
		}
	}
}

func TestLandStaleVerdictRefused(t *testing.T) {
	te := newTestEnv(t)
	te.env.Config.Verify = "make check"
	sb := te.finished("t1")
	te.onVerify(0, nil)
	if _, _, err := sb.VerifyNow(context.Background(), IO{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	// The work changes after verify.
	te.writeIn(sb.Worktree, "more.txt", "x\n")
	_, err := land.Land(context.Background(), te.find("t1"), landOpts())
	if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "another version") {
		t.Errorf("land with a stale verdict: %v", err)
	}
}

// Verify takes time; the base may move meanwhile. Land plans again after
// verify, so it lands onto the base as it is then.
func TestLandReplansAfterVerify(t *testing.T) {
	t.Run("base moved elsewhere lands on the new tip", func(t *testing.T) {
		te := newTestEnv(t)
		te.env.Config.Verify = "make check"
		sb := te.finished("t1")
		var moved string
		te.onVerify(0, func() {
			te.write("other.txt", "from the user\n")
			te.git("add", "other.txt")
			te.git("commit", "-q", "-m", "meanwhile")
			moved = te.git("rev-parse", "HEAD")
		})
		res, err := land.Land(context.Background(), sb, landOpts())
		if err != nil {
			t.Fatal(err)
		}
		if !res.VerifyRan || !res.Verdict.OK {
			t.Errorf("verify ran %v, verdict %+v", res.VerifyRan, res.Verdict)
		}
		if parent := te.git("rev-parse", res.Commit.String()+"^"); parent != moved {
			t.Errorf("landed onto %s, want the tip that moved during verify %s", parent, moved)
		}
		if got := te.git("show", res.Commit.String()+":other.txt"); got != "from the user" {
			t.Errorf("the user's commit was lost: %q", got)
		}
		if got := te.git("show", res.Commit.String()+":lib.txt"); !strings.HasPrefix(got, "ONE") {
			t.Errorf("the change was not landed: %q", got)
		}
	})
	t.Run("base moved into a conflict is refused", func(t *testing.T) {
		te := newTestEnv(t)
		te.env.Config.Verify = "make check"
		sb := te.finished("t1")
		var moved string
		te.onVerify(0, func() {
			te.write("lib.txt", "uno\ntwo\nthree\n")
			te.git("commit", "-q", "-am", "conflicting")
			moved = te.git("rev-parse", "HEAD")
		})
		_, err := land.Land(context.Background(), sb, landOpts())
		if usererr.Code(err) != 3 {
			t.Fatalf("land after a conflicting move = %v (code %d), want a conflict", err, usererr.Code(err))
		}
		if got := te.git("rev-parse", "main"); got != moved {
			t.Errorf("main at %s, want it left at %s", got, moved)
		}
		if _, err := os.Stat(sb.Worktree); err != nil {
			t.Error("the sandbox was removed")
		}
	})
	t.Run("base got the same change so nothing lands", func(t *testing.T) {
		te := newTestEnv(t)
		te.env.Config.Verify = "make check"
		sb := te.finished("t1")
		te.onVerify(0, func() {
			te.write("lib.txt", "ONE\ntwo\nthree\n")
			te.git("commit", "-q", "-am", "same change")
		})
		res, err := land.Land(context.Background(), sb, landOpts())
		if err != nil || !res.Plan.Empty || res.Commit != "" {
			t.Errorf("land = %+v, %v; want an empty plan", res, err)
		}
	})
}

func TestLandRefusesUnstorablePaths(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	te.writeIn(sb.Worktree, ".GIT/hooks/x", "evil\n")
	te.fake.Exit(sb.Container, 0)
	_, err := land.Land(context.Background(), te.find("t1"), landOpts())
	if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), ".GIT") {
		t.Errorf("land with .GIT in the worktree: %v", err)
	}
	snaps, _ := rescue.List(context.Background(), te.env.Git(), "t1")
	if len(snaps) == 0 || len(snaps[0].Skipped) == 0 {
		t.Errorf("the snapshot does not list the skipped path: %+v", snaps)
	}
}

func TestVerifyNow(t *testing.T) {
	te := newTestEnv(t)
	sb := te.start("t1")
	if _, _, err := sb.VerifyNow(context.Background(), IO{Stdout: io.Discard, Stderr: io.Discard}); err == nil || !strings.Contains(err.Error(), "no verify command") {
		t.Errorf("verify without a command: %v", err)
	}
	te.env.Config.Verify = "make check"
	sb = te.start("t2")
	runs := te.onVerify(4, nil)
	v, snap, err := sb.VerifyNow(context.Background(), IO{Stdout: io.Discard, Stderr: io.Discard})
	if err != nil || v.OK || v.ExitCode != 4 || v.Tree != snap.Tree {
		t.Fatalf("verify = %+v on %v, %v", v, snap, err)
	}
	// The same tree is not verified twice.
	if _, _, err := te.find("t2").VerifyNow(context.Background(), IO{Stdout: io.Discard, Stderr: io.Discard}); err != nil || *runs != 1 {
		t.Errorf("second verify of the same tree: %v after %d runs", err, *runs)
	}
	// The verify container is removed after its run.
	for _, c := range te.fake.Containers() {
		if c.Spec.Labels[container.LabelRole] == container.RoleVerify {
			t.Errorf("verify container %s left", c.Name)
		}
	}
}

// VerifyMerged judges the merged tree — the base as it is now with the
// sandbox's change — not the sandbox's own tree, whose passing verdict
// does not count; a failure there refuses and changes nothing.
func TestLandVerifyMergedJudgesTheMergedTree(t *testing.T) {
	for _, code := range []int{0, 1} {
		t.Run(fmt.Sprintf("verify exits %d", code), func(t *testing.T) {
			te := newTestEnv(t)
			te.env.Config.Verify = "make check"
			sb := te.finished("t1")
			// The sandbox's own tree passed verify.
			te.onVerify(0, nil)
			v, snap, err := sb.VerifyNow(context.Background(), IO{Stdout: io.Discard, Stderr: io.Discard})
			if err != nil || !v.OK {
				t.Fatalf("verify alone: %+v, %v", v, err)
			}
			// The base moves on: the merged tree is another tree.
			te.write("other.txt", "from the user\n")
			te.git("add", "other.txt")
			te.git("commit", "-q", "-m", "meanwhile")
			tip := te.git("rev-parse", "main")
			runs := te.onVerify(code, nil)
			o := landOpts()
			o.VerifyMerged = true
			sb = te.find("t1")
			res, err := land.Land(context.Background(), sb, o)
			if *runs != 1 {
				t.Fatalf("verify ran %d times, want once on the merged tree", *runs)
			}
			if res == nil || res.Verdict == nil || res.Verdict.Tree == snap.Tree {
				t.Fatalf("verdict %+v: not the merged tree's", res)
			}
			if code != 0 {
				if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), "on the merged tree") {
					t.Errorf("land = %v, want refused for the merged tree", err)
				}
				if got := te.git("rev-parse", "main"); got != tip {
					t.Errorf("main moved to %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := te.git("rev-parse", res.Commit.String()+"^{tree}"); got != res.Verdict.Tree {
				t.Errorf("landed tree %s, verified %s", got, res.Verdict.Tree)
			}
		})
	}
}

// A land elsewhere while the merged tree is verified makes another merged
// tree: it is verified too before the base moves, and the commit holds
// exactly the tree verified last.
func TestLandVerifyMergedVerifiesAgainWhenTheBaseMoves(t *testing.T) {
	te := newTestEnv(t)
	te.env.Config.Verify = "make check"
	sb := te.finished("t1")
	first := true
	runs := te.onVerify(0, func() {
		if first {
			first = false
			te.write("other.txt", "landed meanwhile\n")
			te.git("add", "other.txt")
			te.git("commit", "-q", "-m", "meanwhile")
		}
	})
	o := landOpts()
	o.VerifyMerged = true
	res, err := land.Land(context.Background(), sb, o)
	if err != nil {
		t.Fatal(err)
	}
	if *runs != 2 {
		t.Errorf("verify ran %d times, want twice (the base moved during the first)", *runs)
	}
	landed := te.git("rev-parse", res.Commit.String()+"^{tree}")
	if res.Verdict == nil || res.Verdict.Tree != landed {
		t.Errorf("landed tree %s, last verified %+v", landed, res.Verdict)
	}
	if got := te.git("show", res.Commit.String()+":other.txt"); got != "landed meanwhile" {
		t.Errorf("the land in between was lost: %q", got)
	}
}
