package review

import "testing"

func TestBinaryFlags(t *testing.T) {
	const zero = "0000000000000000000000000000000000000000"
	entries := []Entry{
		{OldMode: "100644", NewMode: "100644", OldID: "t1", NewID: "b1", Status: 'M', Path: "notes"},
		{OldMode: "000000", NewMode: "100644", OldID: zero, NewID: "b2", Status: 'A', Path: "src/x.go"},
		{OldMode: "000000", NewMode: "100644", OldID: zero, NewID: "b3", Status: 'A', Path: "logo.png"},
		{OldMode: "100644", NewMode: "100644", OldID: "b4", NewID: "b5", Status: 'M', Path: "data.bin"},
		{OldMode: "100644", NewMode: "100644", OldID: "t2", NewID: "t3", Status: 'M', Path: "main.c"},
		{OldMode: "100644", NewMode: "000000", OldID: "b6", NewID: zero, Status: 'D', Path: "gone.c"},
	}
	binary := map[string]bool{"b1": true, "b2": true, "b3": true, "b4": true, "b5": true, "b6": true}
	got := binaryFlags(entries, binary)
	want := []string{"notes", "src/x.go"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want flags for %v", got, want)
	}
	for i, f := range got {
		if f.Path != want[i] {
			t.Errorf("flag %d is %s, want %s", i, f.Path, want[i])
		}
	}
	if ids := binaryCandidates(entries); len(ids) != 8 {
		t.Errorf("candidates %v", ids)
	}
}

func TestTextName(t *testing.T) {
	for p, want := range map[string]bool{
		"src/main.c": true, "Makefile": true, ".bashrc": true, "a/b/c.PY": true,
		"logo.png": false, "x.bin": false, "archive.tar.gz": false, "noext": false,
	} {
		if textName(p) != want {
			t.Errorf("textName(%q) = %v, want %v", p, !want, want)
		}
	}
}
