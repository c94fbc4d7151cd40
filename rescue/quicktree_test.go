package rescue

import (
	"bytes"
	"context"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
)

// The tree ids computed for the fast way are the ones git writes, in
// both object formats, with names git orders as if trees ended in "/".
func TestTreeIDIsGits(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		dir := t.TempDir()
		if out, err := exec.Command("git", "init", "-q", "--object-format="+format, dir).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", format, err, out)
		}
		g := &gitcmd.Runner{GitDir: dir + "/.git", Isolated: true}
		ctx := context.Background()
		blob, err := g.Run(ctx, strings.NewReader("x\n"), "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(string(blob))
		raw, _ := hex.DecodeString(id)
		enc := &treeEncoder{hexLen: len(id)}
		var batch bytes.Buffer
		sub := enc.encode(map[string]quickEntry{"f": {"100755", raw}}, &batch)
		top := enc.encode(map[string]quickEntry{
			"a": {"40000", sub}, "a.b": {"100644", raw}, "a-c": {"120000", raw}, "a0": {"100644", raw},
		}, &batch)
		want := []string{hex.EncodeToString(sub), hex.EncodeToString(top)}
		if err := mktree(ctx, g, &batch, want); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		ls, err := g.Run(ctx, nil, "ls-tree", "--name-only", want[1])
		if err != nil || string(ls) != "a-c\na.b\na\na0\n" {
			t.Fatalf("%s: order %q %v", format, ls, err)
		}
	}
}
