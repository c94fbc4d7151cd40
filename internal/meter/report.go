package meter

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Status is a sandbox's spend as ps shows it.
type Status struct {
	// Metered is false for a sandbox whose model calls the broker does
	// not see (no secret: the agent holds its key); nothing else is set.
	Metered bool    `json:"metered"`
	Spent   *Spent  `json:"spent,omitempty"`
	Budget  *Budget `json:"budget,omitempty"`
	// Over says the budget is spent: the broker refuses model calls.
	Over bool `json:"over,omitempty"`
}

// StatusOf is the spend in the usage log at path against budget b.
func StatusOf(path string, b Budget) *Status {
	st := &Status{Metered: true}
	s, err := SpentIn(path)
	if err != nil {
		return st
	}
	st.Spent = &s
	if !b.IsZero() {
		st.Budget = &b
		st.Over = b.SpentBy(s) != ""
	}
	return st
}

// Column is ps's SPEND: "unmetered", dollars, or tokens where the models
// have no price ("+" when part of it is unpriced), and the budget.
func (st *Status) Column() string {
	if st == nil || !st.Metered {
		return "unmetered"
	}
	if st.Spent == nil {
		return "?"
	}
	s := st.Spent.String()
	if st.Budget != nil {
		s += " of " + st.Budget.String()
	}
	return s
}

// String is the spend in dollars, or in tokens when nothing of it is
// priced; "+" marks priced figures that leave out unpriced tokens.
func (s Spent) String() string {
	switch {
	case s.USD == 0 && s.Unpriced > 0:
		return Short(s.Usage.Tokens()) + " tok"
	case s.Unpriced > 0:
		return Dollars(s.USD) + "+"
	}
	return Dollars(s.USD)
}

// Trailer is land's Sandbox-Usage: "182k in, 21k out, $1.43" (input
// counting the cache), with what was unknown or unpriced.
func (s Spent) Trailer() string {
	u := s.Usage
	out := Short(u.Input+u.CacheRead+u.CacheWrite) + " in, " + Short(u.Output) + " out, " + s.String()
	if s.Unknown > 0 {
		out += ", " + Short(int64(s.Unknown)) + " of unknown usage"
	}
	return out
}

// Source is one sandbox's usage log for a report.
type Source struct {
	Sandbox string
	Removed bool
	Path    string
}

// Archived lists the usage logs rm kept in dir (see worktree's
// UsageArchive: BRANCH@START.jsonl).
func Archived(dir string) ([]Source, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Source
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if i := strings.LastIndex(name, "@"); ok && i > 0 {
			out = append(out, Source{Sandbox: strings.ReplaceAll(name[:i], "%2F", "/"), Removed: true, Path: filepath.Join(dir, e.Name())})
		}
	}
	return out, nil
}

// Row is one line of a report: a sandbox, a model or a day.
type Row struct {
	Name    string `json:"name"`
	Removed bool   `json:"removed,omitempty"`
	Spent
}

// Report totals usage logs by sandbox, model and day (UTC).
type Report struct {
	Since     time.Time `json:"since,omitzero"`
	Total     Spent     `json:"total"`
	Sandboxes []Row     `json:"sandboxes"`
	Models    []Row     `json:"models"`
	Days      []Row     `json:"days"`
}

// Totals reads the logs of sources from since on (zero: all).
func Totals(sources []Source, since time.Time) (*Report, error) {
	r := &Report{Since: since, Sandboxes: []Row{}, Models: []Row{}, Days: []Row{}}
	models, days := map[string]*Spent{}, map[string]*Spent{}
	for _, src := range sources {
		var s Spent
		err := ReadLog(src.Path, since, func(rec *Record) {
			s.add(rec)
			r.Total.add(rec)
			model := rec.Model
			if model == "" {
				model = "(unknown)"
			}
			addTo(models, model, rec)
			addTo(days, rec.Time.UTC().Format(time.DateOnly), rec)
		})
		if err != nil {
			return nil, err
		}
		if s.Requests > 0 {
			r.Sandboxes = append(r.Sandboxes, Row{Name: src.Sandbox, Removed: src.Removed, Spent: s})
		}
	}
	sort.SliceStable(r.Sandboxes, func(i, j int) bool { return r.Sandboxes[i].Name < r.Sandboxes[j].Name })
	r.Models, r.Days = rows(models), rows(days)
	return r, nil
}

func addTo(m map[string]*Spent, key string, rec *Record) {
	if m[key] == nil {
		m[key] = &Spent{}
	}
	m[key].add(rec)
}

func rows(m map[string]*Spent) []Row {
	out := make([]Row, 0, len(m))
	for k, s := range m {
		out = append(out, Row{Name: k, Spent: *s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Sources are the usage logs of the sandboxes named live (as the layout
// keeps them, beside the decision log) and of every removed sandbox.
func Sources(l worktree.Layout, live []string) ([]Source, error) {
	out, err := Archived(l.UsageArchive())
	for _, b := range live {
		out = append(out, Source{Sandbox: b, Path: filepath.Join(l.NetLogDir(b), UsageFile)})
	}
	return out, err
}

// Only keeps the sources of the sandboxes named.
func Only(sources []Source, names []string) []Source {
	var out []Source
	for _, s := range sources {
		if slices.Contains(names, s.Sandbox) {
			out = append(out, s)
		}
	}
	return out
}

// ParseSince reads --since: a Go duration ("36h") or days ("7d").
func ParseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("--since %q: give a duration such as 24h or 7d", s)
	}
	return now.Add(-d), nil
}

// Short is dash's SPEND: the spend alone, "-" when not metered.
func (st *Status) Short() string {
	if st == nil || !st.Metered {
		return "-"
	}
	if st.Spent == nil {
		return "?" // on the engine (copy mode), or unreadable
	}
	return st.Spent.String()
}

// Tables are the report's three tables (by sandbox, model and day), each
// with its header and a total row, every cell printable.
func (rep *Report) Tables() [][][]string {
	var out [][][]string
	for _, part := range []struct {
		head string
		rows []Row
	}{{"SANDBOX", rep.Sandboxes}, {"MODEL", rep.Models}, {"DAY", rep.Days}} {
		t := [][]string{{part.head, "REQUESTS", "INPUT", "OUTPUT", "CACHE", "SPEND"}}
		for _, r := range append(part.rows, Row{Name: "total", Spent: rep.Total}) {
			name := termsafe.String(r.Name)
			if r.Removed {
				name += " (removed)"
			}
			u := r.Usage
			t = append(t, []string{name, strconv.Itoa(r.Requests), Short(u.Input), Short(u.Output), Short(u.CacheRead + u.CacheWrite), r.Spent.String()})
		}
		out = append(out, t)
	}
	return out
}

// Unpriced names the models some of whose requests had no price.
func (rep *Report) Unpriced() []string {
	var out []string
	for _, m := range rep.Models {
		if m.Unpriced > 0 {
			out = append(out, termsafe.String(m.Name))
		}
	}
	return out
}
