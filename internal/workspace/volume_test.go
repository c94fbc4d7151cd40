package workspace

import "testing"

func TestParseAdded(t *testing.T) {
	x := parseAdded("5000\tbig.bin\x0012\tdir/a b\x00oops\x00\x00lib\x00tools/bare/HEAD\x00\x00sub\x00\x00error: unable to add '.GIT/x'\n")
	if large := x.TooLarge; len(large) != 2 || large[0].Path != "big.bin" || large[0].Size != 5000 || large[1].Path != "dir/a b" {
		t.Errorf("large = %+v", large)
	}
	if len(x.NotIgnored) != 2 || x.NotIgnored[0] != "lib" || x.NotIgnored[1] != "tools/bare/HEAD" || len(x.Submodules) != 1 || x.Submodules[0] != "sub" {
		t.Errorf("quarantined not ignored %q, submodules %q", x.NotIgnored, x.Submodules)
	}
	if x.AddErrors != "error: unable to add '.GIT/x'\n" {
		t.Errorf("add errors = %q", x.AddErrors)
	}
	if x := parseAdded("\x00\x00\x00"); len(x.TooLarge) != 0 || x.AddErrors != "" || x.NotIgnored != nil {
		t.Errorf("empty: %+v", x)
	}
	// A path git would take for .git is not believed.
	if x := parseAdded("9\t.git/x\x00\x00\x00\x00"); len(x.TooLarge) != 0 {
		t.Errorf("took %+v", x.TooLarge)
	}
}
