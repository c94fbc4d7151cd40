package config

import "testing"

func TestByteSettings(t *testing.T) {
	var none *Loaded
	if none.SnapshotBudgetBytes() != 0 || none.MaxFileSizeBytes() != 0 {
		t.Error("no configuration: want no bounds")
	}
	l := &Loaded{}
	l.Budget.Snapshots, l.Rescue.MaxFileSize = "2g", "10m"
	if got := l.SnapshotBudgetBytes(); got != 2<<30 {
		t.Errorf("budget.snapshots 2g = %d", got)
	}
	if got := l.MaxFileSizeBytes(); got != 10<<20 {
		t.Errorf("rescue.max_file_size 10m = %d", got)
	}
	l.Budget.Snapshots, l.Rescue.MaxFileSize = "lots", "big"
	if l.SnapshotBudgetBytes() != 0 || l.MaxFileSizeBytes() != 0 {
		t.Error("unreadable sizes (refused at load): want no bounds here")
	}
}
