package toolchain

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// Prune removes the stale warm image, keeps the newest and the
// devcontainer image it was made from, removes another devcontainer
// image, keeps one a container uses, and with Caches removes the unused
// cache volume.
func TestPrunerKeepsWhatIsUsed(t *testing.T) {
	te := newRepo(t)
	var out strings.Builder
	te.env.UI = ui.New(&out, ui.Options{NoColor: true})
	id := te.env.Repo.ID
	ctx := context.Background()
	f := enginefake.New("img").WithCommit()
	cid, err := f.Create(ctx, sandboxSpec())
	if err != nil {
		t.Fatal(err)
	}
	commit := func(tag string, labels map[string]string) string {
		t.Helper()
		imgID, err := f.Images().Commit(ctx, cid, container.CommitOptions{Tag: tag, Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
		return imgID
	}
	dcLabels := map[string]string{devcontainer.LabelRepo: id}
	parent := commit("dc:parent", dcLabels)
	commit("dc:other", dcLabels)
	warm := func(base string) map[string]string {
		return map[string]string{LabelWarm: "1", LabelWarmRepo: id, LabelWarmBase: base, devcontainer.LabelRepo: id}
	}
	commit("warm:old", warm("sha256:gone"))
	commit("warm:new", warm(parent))
	used := commit("dc:used", dcLabels)
	s := sandboxSpec()
	s.Name = "user-of-dc-used"
	s.Image = "dc:used"
	if _, err := f.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := f.CreateVolume(ctx, container.VolumeSpec{Name: container.RepoCacheVolume(id, "deps"),
		Labels: map[string]string{container.LabelManaged: "1", container.LabelCache: "1", container.LabelRepo: id, container.LabelCacheTarget: "/deps"}}); err != nil {
		t.Fatal(err)
	}
	p := &Pruner{Env: te.env, Caches: true}
	if err := p.On(ctx, f, "local"); err != nil {
		t.Fatal(err)
	}
	left, _ := f.Images().List(ctx)
	var tags []string
	for _, img := range left {
		tags = append(tags, img.Tags...)
	}
	slices.Sort(tags)
	if want := []string{"dc:parent", "dc:used", "img", "warm:new"}; !slices.Equal(tags, want) {
		t.Errorf("images left %q, want %q (used %s)", tags, want, used)
	}
	if p.Removed != 3 || p.Kept != 2 {
		t.Errorf("removed %d, kept %d; want 3 and 2:\n%s", p.Removed, p.Kept, out.String())
	}
	for _, w := range []string{"removed image warm:old on engine local", "kept dc:parent on engine local: the warm image warm:new is made from it", "kept dc:used on engine local: a sandbox uses it", "removed cache"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if WarmName(container.Image{ID: "sha256:0123456789abcdef"}) != "(untagged) 0123456789ab" {
		t.Errorf("WarmName of an untagged image = %q", WarmName(container.Image{ID: "sha256:0123456789abcdef"}))
	}
}
