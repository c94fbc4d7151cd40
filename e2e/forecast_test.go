package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// forecastOf is the conflicts field of ps --json.
type forecastOf struct {
	Branch    string `json:"branch"`
	Conflicts *struct {
		Base []string            `json:"base"`
		With map[string][]string `json:"with"`
	} `json:"forecast"`
}

func (e *Env) forecasts() map[string]forecastOf {
	e.t.Helper()
	r := e.MustSandbox("ps", "--json")
	var list []forecastOf
	if err := json.Unmarshal([]byte(r.Stdout), &list); err != nil {
		e.t.Fatalf("ps --json: %v\n%s", err, r.Stdout)
	}
	out := map[string]forecastOf{}
	for _, f := range list {
		if f.Conflicts == nil {
			e.t.Fatalf("ps --json: %s has no forecast\n%s", f.Branch, r)
		}
		out[f.Branch] = f
	}
	return out
}

func withNames(f forecastOf) []string {
	var out []string
	if len(f.Conflicts.Base) > 0 {
		out = append(out, "base")
	}
	for n := range f.Conflicts.With {
		out = append(out, n)
	}
	return out
}

// TestConflictForecast: A and B edit the same lines, C another file. ps
// marks A↔B and not C; after A lands, B conflicts with the base instead.
func TestConflictForecast(t *testing.T) {
	e := NewEnv(t)
	e.WriteFile("lines.txt", "one\ntwo\nthree\nfour\nfive\nsix\n")
	e.WriteFile("other.txt", "other\n")
	e.Git("add", ".")
	e.Git("commit", "-q", "-m", "files")
	e.MustSandbox("start", "fa", "--agent", "shell", "--", "sh", "-c", `sed -i 's/two/TWO by A/' lines.txt`)
	e.MustSandbox("start", "fb", "--agent", "shell", "--", "sh", "-c", `sed -i 's/two/two by B/' lines.txt`)
	e.MustSandbox("start", "fc", "--agent", "shell", "--", "sh", "-c", `echo C > other.txt`)

	fs := e.forecasts()
	for branch, want := range map[string][]string{"fa": {"fb"}, "fb": {"fa"}, "fc": nil} {
		if got := withNames(fs[branch]); !reflect.DeepEqual(got, want) {
			t.Errorf("%s forecast conflicts with %v, want %v", branch, got, want)
		}
	}
	if got := fs["fa"].Conflicts.With["fb"]; !reflect.DeepEqual(got, []string{"lines.txt"}) {
		t.Errorf("fa↔fb paths %v, want [lines.txt]", got)
	}

	ps := e.MustSandbox("ps")
	if !strings.Contains(ps.Stdout, "CONFLICTS") || !strings.Contains(ps.Stdout, " SNAP ") {
		t.Errorf("ps has no CONFLICTS or SNAP column:\n%s", ps.Stdout)
	}
	for _, line := range strings.Split(ps.Stdout, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "fa":
			if !strings.Contains(line+" ", " fb ") {
				t.Errorf("ps row of fa does not name fb: %q", line)
			}
		case "fc":
			if strings.Contains(line, " fa") || strings.Contains(line, " fb") || strings.Contains(line+" ", " base ") {
				t.Errorf("ps row of fc names a conflict: %q", line)
			}
		}
	}
	c := e.MustSandbox("conflicts")
	if !strings.Contains(c.Stdout, "fa") || !strings.Contains(c.Stdout, "fb") || !strings.Contains(c.Stdout, "lines.txt") || strings.Contains(c.Stdout, "fc") {
		t.Errorf("conflicts does not list exactly fa↔fb in lines.txt:\n%s", c)
	}
	var rows []struct {
		Branch string              `json:"branch"`
		With   map[string][]string `json:"with"`
	}
	cj := e.MustSandbox("conflicts", "--json")
	if err := json.Unmarshal([]byte(cj.Stdout), &rows); err != nil || len(rows) != 3 {
		t.Fatalf("conflicts --json: %v\n%s", err, cj)
	}

	e.MustSandbox("land", "fa")
	fs = e.forecasts()
	if _, ok := fs["fa"]; ok {
		t.Fatalf("fa still listed after land")
	}
	if got := withNames(fs["fb"]); !reflect.DeepEqual(got, []string{"base"}) {
		t.Errorf("after fa landed fb conflicts with %v, want [base]", got)
	}
	if got := fs["fb"].Conflicts.Base; !reflect.DeepEqual(got, []string{"lines.txt"}) {
		t.Errorf("fb's base conflict paths %v", got)
	}
	if got := withNames(fs["fc"]); got != nil {
		t.Errorf("after fa landed fc conflicts with %v", got)
	}
	// The forecast agrees with land.
	if r := e.Sandbox("land", "fb"); r.Code != 3 {
		t.Errorf("land fb: want exit 3 (conflict), got %s", r)
	}
}
