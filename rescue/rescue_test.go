package rescue

import (
	"strings"
	"testing"
	"time"
)

func TestMessageRoundTrip(t *testing.T) {
	s := Snapshot{Branch: "agent/x", Reason: ReasonInterval, Changes: 7, Baseline: "b", Start: "s", Head: "h",
		Skipped: []string{".GIT/hooks/x", "we\"ird\n"}}
	got, ok := parseMessage(message(s))
	if !ok {
		t.Fatal("not parsed as a snapshot")
	}
	if got.Branch != s.Branch || got.Reason != s.Reason || got.Changes != 7 || got.Baseline != "b" || got.Start != "s" || got.Head != "h" {
		t.Errorf("round trip = %+v", got)
	}
	if len(got.Skipped) != 2 || got.Skipped[1] != "we\"ird\n" {
		t.Errorf("skipped = %q", got.Skipped)
	}
	if _, ok := parseMessage("an ordinary commit\n\nSigned-off-by: x\n"); ok {
		t.Error("an ordinary commit parsed as a snapshot")
	}
}

func TestParseLog(t *testing.T) {
	msg := message(Snapshot{Branch: "t1", Reason: ReasonStart})
	out := "\x1e" + "aaaa\x00tttt\x00" + "1700000000\x00" + msg + "\n" +
		"\x1e" + "bbbb\x00uuuu\x001700000001\x00user commit\n"
	got := parseLog([]byte(out))
	if len(got) != 1 || got[0].ID != "aaaa" || got[0].Tree != "tttt" || !got[0].Time.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("parseLog = %+v", got)
	}
	if got[0].Baseline != "aaaa" {
		t.Errorf("a start snapshot is its own baseline: %+v", got[0])
	}
}

func TestRefs(t *testing.T) {
	r := Refs{Branch: "a/b"}
	for got, want := range map[string]string{
		r.Baseline(): "refs/sandbox/a%2Fb/baseline", r.Rescue(): "refs/sandbox/a%2Fb/rescue",
		r.Agent(): "refs/sandbox/a%2Fb/agent", r.Ended("20260101T000000Z"): "refs/sandbox/a%2Fb/ended/20260101T000000Z",
	} {
		if got != want {
			t.Errorf("%s, want %s", got, want)
		}
	}
	if !strings.HasPrefix(r.Rescue(), RefPrefix) {
		t.Error("prefix")
	}
	// "fix" and "fix/rescue" never collide (a ref cannot be a directory).
	if strings.HasPrefix(Refs{Branch: "fix/rescue"}.Baseline(), Refs{Branch: "fix"}.Rescue()+"/") {
		t.Error("refs of fix and fix/rescue collide")
	}
}
