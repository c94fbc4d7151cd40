package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// execAllowed are the packages that may import os/exec: every process the
// tool starts is built in one of them, so the rules that keep agent-written
// data from steering the host live in one place each.
var execAllowed = map[string]string{
	"internal/gitcmd":  "the one gateway for git processes (hardened environment, safety config)",
	"container/docker": "the gateway to Docker (the SDK today; a docker CLI call would go here)",
	"internal/proc":    "the tool's own binary (the detached supervisor), the PATH look-up for it, the user's pager, secret commands and clean filters",
}

// TestOSExecOnlyInGateways fails when a non-test Go file outside the
// allowed packages imports os/exec. End-to-end tests (e2e/) and _test.go
// files run git and the binary directly to check them from outside, and
// are exempt.
func TestOSExecOnlyInGateways(t *testing.T) {
	root := moduleRoot(t)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel == "e2e" || name == "testdata" || name == "vendor" || rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		pkg := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p != "os/exec" {
				continue
			}
			if _, ok := execAllowed[pkg]; !ok {
				t.Errorf("%s imports os/exec: start git through internal/gitcmd, Docker through container/docker, anything else through internal/proc", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d Go files checked under %s: the walk missed the tree", checked, root)
	}
}

// moduleRoot is the directory holding go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
