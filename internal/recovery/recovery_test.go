package recovery

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/record"
)

// A start under way is left alone; one whose process is gone (its mark's
// lock free) is undone once, with the record it planned; a finished start
// leaves no mark.
func TestStartUndoesOnlyAStartThatDied(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "b1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err := Begin(filepath.Join(dir, MarkName), &record.Record{Branch: "b1", Container: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	var removed []string
	remove := func(r *record.Record) error {
		removed = append(removed, r.Container)
		return os.RemoveAll(dir)
	}
	if ok, err := Start(dir, t.TempDir(), remove); ok || err != nil || len(removed) != 0 {
		t.Fatalf("a start under way was undone: %v %v", ok, err)
	}
	if _, err := Begin(filepath.Join(dir, MarkName), &record.Record{Branch: "b1"}); err == nil {
		t.Fatal("a second start of the same sandbox marked it too")
	}
	m.Release() // the process died: the lock goes, the mark stays
	if got := List(filepath.Dir(dir)); len(got) != 1 || got[0] != dir {
		t.Fatalf("List = %v", got)
	}
	if ok, err := Start(dir, t.TempDir(), remove); !ok || err != nil || len(removed) != 1 || removed[0] != "c1" {
		t.Fatalf("Start = %v, %v; removed %v", ok, err, removed)
	}
	if ok, _ := Start(dir, t.TempDir(), remove); ok {
		t.Error("undone twice")
	}
	// A finished start.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	m, err = Begin(filepath.Join(dir, MarkName), &record.Record{Branch: "b1"})
	if err != nil {
		t.Fatal(err)
	}
	m.Done()
	if ok, _ := Start(dir, t.TempDir(), remove); ok || len(List(filepath.Dir(dir))) != 0 {
		t.Error("a finished start left its mark")
	}
}

// A start killed while writing its mark had made the directory only.
func TestStartOfAnEmptyMarkRemovesTheDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "b1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, MarkName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ok, err := Start(dir, filepath.Join(root, ".trash"), func(*record.Record) error {
		t.Error("remove called for an empty mark")
		return nil
	})
	if !ok || err != nil {
		t.Fatalf("Start = %v, %v", ok, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory stayed: %v", err)
	}
}
