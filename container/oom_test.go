package container

import "testing"

func TestMemorySize(t *testing.T) {
	for b, want := range map[int64]string{4 << 30: "4g", 512 << 20: "512m", 1536 << 20: "1536m", 3 << 10: "3k", 1000: "1000"} {
		if got := MemorySize(b); got != want {
			t.Errorf("MemorySize(%d) = %q; want %q", b, got, want)
		}
	}
}

func TestOutOfMemory(t *testing.T) {
	if got := OutOfMemory(&State{OOMKilled: true}, 0); got != "out of memory" {
		t.Errorf("no limit: %q", got)
	}
	if got := OutOfMemory(&State{}, 1<<30); got != "" {
		t.Errorf("not killed for memory: %q", got)
	}
	if got := OutOfMemory(nil, 0); got != "" {
		t.Errorf("no state: %q", got)
	}
}
