package spend

import (
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/meter"
)

func TestNotesSayWhatTheTotalsLeaveOut(t *testing.T) {
	r := &Result{
		Report: &meter.Report{
			Total:  meter.Spent{Requests: 3, Unknown: 1},
			Models: []meter.Row{{Name: "llama\x1b[31m", Spent: meter.Spent{Unpriced: 2}}, {Name: "gpt-5"}},
		},
		Unmetered: []string{"a", "b"},
	}
	notes := strings.Join(r.Notes(), "\n")
	for _, want := range []string{`no price for llama\x1b[31m:`, "1 request(s) ended without their usage", "not metered (the agent holds its own model key): a, b"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if got := only([]string{"a", "b", "c"}, []string{"c", "a"}); strings.Join(got, ",") != "a,c" {
		t.Errorf("only: %q", got)
	}
	if n := (&Result{Report: &meter.Report{}}).Notes(); len(n) != 0 {
		t.Errorf("notes of nothing: %q", n)
	}
}
