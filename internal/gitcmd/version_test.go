package gitcmd

import (
	"context"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in           string
		major, minor int
		ok           bool
	}{
		{"git version 2.39.5", 2, 39, true},
		{"git version 2.45.1.windows.1\n", 2, 45, true},
		{"git version 3.0", 3, 0, true},
		{"git version 2", 0, 0, false},
		{"version 2.39.5", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		v, err := ParseVersion(tt.in)
		if (err == nil) != tt.ok || tt.ok && (v.Major != tt.major || v.Minor != tt.minor) {
			t.Errorf("ParseVersion(%q) = %+v, %v", tt.in, v, err)
		}
	}
	v := Version{Major: 2, Minor: 39}
	for _, c := range []struct {
		major, minor int
		want         bool
	}{{2, 38, true}, {2, 39, true}, {2, 40, false}, {1, 99, true}, {3, 0, false}} {
		if got := v.AtLeast(c.major, c.minor); got != c.want {
			t.Errorf("2.39 AtLeast(%d, %d) = %v", c.major, c.minor, got)
		}
	}
}

func TestGitVersion(t *testing.T) {
	v, err := GitVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v.Major < 2 || v.Text == "" {
		t.Errorf("GitVersion = %+v", v)
	}
}
