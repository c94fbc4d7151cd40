package container

import "strconv"

// OutOfMemory says "out of memory (limit 4g)" when st says the engine
// ended the container for memory (memoryBytes: the limit its spec set), "" when it
// did not.
func OutOfMemory(st *State, memoryBytes int64) string {
	if st == nil || !st.OOMKilled {
		return ""
	}
	if memoryBytes <= 0 {
		return "out of memory"
	}
	return "out of memory (limit " + MemorySize(memoryBytes) + ")"
}

// MemorySize writes a memory limit as the config and --memory take it.
func MemorySize(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if b%u.size == 0 {
			return strconv.FormatInt(b/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}
