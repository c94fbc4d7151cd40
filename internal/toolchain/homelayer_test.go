package toolchain

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
)

// keepHomeScript copies the home into the layer, every entry but the
// mounts under it (and quotes what a repository named).
func TestKeepHomeScriptLeavesMountsOut(t *testing.T) {
	script := keepHomeScript([]container.Mount{
		{Source: "/state/home", Target: container.Home},
		{Source: "vol", Target: container.Home + "/.cache/bu'ild"},
		{Source: "vol2", Target: container.Home + "/go/pkg/mod/"},
		{Source: "/state/ws", Target: container.Workspace},
	})
	root := t.TempDir()
	home, layer := filepath.Join(root, "home"), filepath.Join(root, "layer")
	for _, f := range []string{".local/bin/tool", ".cache/pip/x", ".cache/bu'ild/big", "go/pkg/mod/m", "go/bin/g", "marker", "..odd"} {
		p := filepath.Join(home, f)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(f), 0o644))
	}
	must(t, os.Symlink("/etc/passwd", filepath.Join(home, "link")))
	script = strings.NewReplacer(container.Home, home, homeLayer, layer).Replace(script)
	if out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, script)
	}
	var got []string
	_ = filepath.Walk(layer, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			rel, _ := filepath.Rel(layer, p)
			got = append(got, rel)
		}
		return nil
	})
	want := "..odd .cache/pip/x .local/bin/tool go/bin/g link marker"
	if strings.Join(got, " ") != want {
		t.Errorf("layer holds %q, want %q", strings.Join(got, " "), want)
	}
	if l, err := os.Readlink(filepath.Join(layer, "link")); err != nil || l != "/etc/passwd" {
		t.Errorf("a link was not copied as a link: %q %v", l, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
