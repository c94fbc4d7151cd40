package config

// SnapshotBudgetBytes is budget.snapshots in bytes (0: no bound, also
// with no configuration).
func (l *Loaded) SnapshotBudgetBytes() int64 {
	if l == nil {
		return 0
	}
	n, err := MemoryBytes(l.Budget.Snapshots)
	if err != nil {
		return 0
	}
	return n
}

// MaxFileSizeBytes is rescue.max_file_size in bytes (0: no limit, also
// with no configuration).
func (l *Loaded) MaxFileSizeBytes() int64 {
	if l == nil {
		return 0
	}
	n, err := FileSizeBytes(l.Rescue.MaxFileSize)
	if err != nil {
		return 0
	}
	return n
}
