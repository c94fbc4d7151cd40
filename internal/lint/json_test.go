package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// printedEncoders are the encoders whose output the commands would print
// raw: encoding/json writes DEL, C1 controls and bidirectional overrides as
// they are.
var printedEncoders = map[string][]string{
	"encoding/json": {"Marshal", "MarshalIndent", "NewEncoder"},
}

// TestCommandsPrintJSONThroughTermsafe fails when a command (the package
// that prints) encodes JSON with encoding/json itself: every JSON output
// goes through termsafe.NewJSONEncoder or termsafe.MarshalJSON, so agent-
// chosen text in it (file names, branches) is escaped as text output is.
func TestCommandsPrintJSONThroughTermsafe(t *testing.T) {
	dir := filepath.Join(moduleRoot(t), "cmd", "git-sandbox")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		local := map[string]string{} // import name → path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if _, ok := printedEncoders[p]; !ok {
				continue
			}
			n := filepath.Base(p)
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			for _, fn := range printedEncoders[local[id.Name]] {
				if sel.Sel.Name == fn {
					t.Errorf("cmd/git-sandbox/%s uses %s.%s: print JSON with termsafe.NewJSONEncoder or termsafe.MarshalJSON", name, local[id.Name], fn)
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("only %d files checked in %s", checked, dir)
	}
}
