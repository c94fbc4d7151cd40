package netlog

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestSuggest(t *testing.T) {
	a := Summary{Hosts: []HostSummary{
		{Host: "a.example.com", Port: 443, Allowed: 2},
		{Host: "b.example.com", Port: 443, Denied: 1},
		{Host: "example.com", Port: 80, Allowed: 1},
		{Host: "x.example.co.uk", Port: 443, Allowed: 3},
		{Host: "y.example.co.uk", Port: 443, Allowed: 3},
		{Host: "pypi.org", Port: 443, Allowed: 4},
		{Host: "leaky.test", Port: 443, Leaks: 2},
		{Host: "192.0.2.7", Port: 8080, Denied: 2},
	}}
	b := Summary{Hosts: []HostSummary{
		{Host: "c.example.com", Port: 443, Allowed: 1},
		{Host: "c.example.com", Port: 8443, Allowed: 1},
		{Host: "pypi.org", Port: 443, Allowed: 1},
	}}
	got := Suggest(a, b)
	var entries []string
	for _, s := range got {
		entries = append(entries, s.Entry)
	}
	want := "*.example.com 192.0.2.7:8080 c.example.com:8443 example.com pypi.org x.example.co.uk y.example.co.uk"
	if strings.Join(entries, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(entries, " "), want)
	}
	if got[0].Seen != 4 || got[0].Denied != 1 || strings.Join(got[0].Hosts, ",") != "a.example.com,b.example.com,c.example.com" {
		t.Fatalf("wildcard %+v", got[0])
	}
	text := SuggestTOML(got, "a, b")
	var doc struct{ Allow []string }
	if _, err := toml.Decode(text, &doc); err != nil || len(doc.Allow) != len(got) {
		t.Fatalf("not TOML an allow list takes: %v\n%s", err, text)
	}
	for _, line := range []string{
		`"*.example.com", # a.example.com, b.example.com, c.example.com`,
		`"example.com", # seen once`,
		`"192.0.2.7:8080", # denied`,
		`"pypi.org",` + "\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("no %q in\n%s", line, text)
		}
	}
	if strings.Contains(text, "leaky") {
		t.Errorf("a host seen only in leaks:\n%s", text)
	}
	if s := SuggestTOML(nil, "x"); !strings.Contains(s, "allow = []") {
		t.Errorf("empty: %s", s)
	}
}
