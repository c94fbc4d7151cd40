package meter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/worktree"
)

func writeLog(t *testing.T, path string, recs ...Record) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, r := range recs {
		j, _ := json.Marshal(r)
		b.Write(append(j, '\n'))
	}
	b.WriteString("{cut short\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTotalsBySandboxModelAndDay(t *testing.T) {
	l := worktree.Layout{Root: t.TempDir(), RepoID: "r"}
	day1, day2 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	writeLog(t, filepath.Join(l.NetLogDir("feat/a"), UsageFile),
		Record{Time: day1, Model: "claude-sonnet-4-5", Usage: Usage{Input: 1000, Output: 100}, CostUSD: 0.0045},
		Record{Time: day2, Model: "llama", Usage: Usage{Input: 50, Output: 5}, Unpriced: true})
	writeLog(t, filepath.Join(l.UsageArchive(), "feat%2Fold@20261130T000000Z.jsonl"),
		Record{Time: day1, Model: "claude-sonnet-4-5", Usage: Usage{Input: 2000, Output: 200}, CostUSD: 0.009},
		Record{Time: day2, Unknown: true})
	src, err := Sources(l, []string{"feat/a", "gone"})
	if err != nil || len(src) != 3 {
		t.Fatalf("sources %+v %v", src, err)
	}
	rep, err := Totals(src, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Requests != 4 || !near(rep.Total.USD, 0.0135) || rep.Total.Usage.Input != 3050 || rep.Total.Unknown != 1 || rep.Total.Unpriced != 1 {
		t.Errorf("total %+v", rep.Total)
	}
	if len(rep.Sandboxes) != 2 || rep.Sandboxes[0].Name != "feat/a" || rep.Sandboxes[1].Name != "feat/old" || !rep.Sandboxes[1].Removed {
		t.Errorf("sandboxes %+v", rep.Sandboxes)
	}
	if len(rep.Models) != 3 || rep.Models[0].Name != "(unknown)" || rep.Models[1].Requests != 2 {
		t.Errorf("models %+v", rep.Models)
	}
	if len(rep.Days) != 2 || rep.Days[0].Name != "2026-12-01" || !near(rep.Days[0].USD, 0.0135) {
		t.Errorf("days %+v", rep.Days)
	}
	since, _ := ParseSince("1d", day2.Add(time.Hour))
	if rep, _ := Totals(Only(src, []string{"feat/a"}), since); rep.Total.Requests != 1 || rep.Models[0].Name != "llama" {
		t.Errorf("since a day, feat/a only: %+v", rep.Total)
	}
	if _, err := ParseSince("soon", day1); err == nil {
		t.Error("--since soon parses")
	}
}

func TestColumnsAndTrailer(t *testing.T) {
	if c := (&Status{}).Column(); c != "unmetered" {
		t.Errorf("unmetered: %q", c)
	}
	s := Spent{USD: 1.434, Usage: Usage{Input: 100_000, CacheRead: 82_000, Output: 21_000}, Requests: 3}
	if c := (&Status{Metered: true, Spent: &s, Budget: &Budget{USD: 5}}).Column(); c != "$1.43 of $5.00" {
		t.Errorf("column %q", c)
	}
	if tr := s.Trailer(); tr != "182k in, 21k out, $1.43" {
		t.Errorf("trailer %q", tr)
	}
	if c := (Spent{Usage: Usage{Input: 12_000}, Unpriced: 1}).String(); c != "12k tok" {
		t.Errorf("unpriced %q", c)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, UsageFile)
	writeLog(t, path, Record{CostUSD: 4.1})
	if a := Alert(path, Budget{USD: 5}); a != "budget-80" {
		t.Errorf("alert at 82%%: %q", a)
	}
	if a := Alert(path, Budget{USD: 4}); a != "budget-spent" {
		t.Errorf("alert past: %q", a)
	}
	if a := Alert(path, Budget{USD: 10}); a != "" {
		t.Errorf("alert at 41%%: %q", a)
	}
	if st := StatusOf(path, Budget{USD: 4}); !st.Over {
		t.Errorf("status %+v", st)
	}
}
