package container

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRefuseUnsafeHostPath(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home", "user")
	if err := os.MkdirAll(filepath.Join(home, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	linkToHome := filepath.Join(tmp, "link-home")
	linkToRoot := filepath.Join(tmp, "link-root")
	if err := os.Symlink(home, linkToHome); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/", linkToRoot); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		refuse bool
	}{
		{"/", true},
		{home, true},
		{filepath.Dir(home), true},
		{tmp, true},
		{linkToHome, true},
		{linkToRoot, true},
		{filepath.Join(home, "proj"), false},
		{"relative/path", true},
	}
	for _, tt := range tests {
		_, err := RefuseUnsafeHostPath("workspace", tt.path)
		if (err != nil) != tt.refuse {
			t.Errorf("RefuseUnsafeHostPath(%q) error = %v, want refusal %v", tt.path, err, tt.refuse)
		}
	}
}
