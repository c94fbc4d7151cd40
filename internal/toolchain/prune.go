package toolchain

import (
	"context"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/devcontainer"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// Pruner removes one repository's unused images (and with Caches its
// cache volumes) engine by engine, counting what it removed and kept.
type Pruner struct {
	Env           *Env
	Caches        bool
	Removed, Kept int
	// where is " on engine NAME" for a configured engine's messages.
	where string
}

// On prunes one engine: its warm images but the newest, its devcontainer
// images no warm image was made from, and with Caches its cache volumes.
// name is the engine's name in the user's config ("" for the
// environment's). An engine that keeps no images of its own is skipped.
func (p *Pruner) On(ctx context.Context, d container.Engine, name string) error {
	p.where = ""
	if name != "" {
		p.where = " on engine " + termsafe.String(name)
	}
	if pool, ok := d.(container.HelperPool); ok {
		// The engine's ready helpers hold its image on their nodes; the
		// next start makes them again.
		st, err := pool.Pool(ctx, true)
		if err != nil {
			return err
		}
		if st.Removed > 0 {
			p.Removed += st.Removed
			p.Env.UI.Infof("removed %d ready helpers of the warm pool%s", st.Removed, p.where)
		}
	}
	// Warm images first: a devcontainer image they were made from is
	// their parent, and goes only after them.
	warm, err := d.Images().List(ctx, LabelWarm+"=1", LabelWarmRepo+"="+p.Env.Repo.ID)
	if container.IsNotSupported(err) {
		return nil
	}
	if err != nil {
		return err
	}
	parentOf, err := p.warm(ctx, d, warm)
	if err != nil {
		return err
	}
	if err := p.devcontainer(ctx, d, parentOf); err != nil {
		return err
	}
	if p.Caches {
		return p.cacheVolumes(ctx, d)
	}
	return nil
}

// remove removes one image, or says which container keeps it.
func (p *Pruner) remove(ctx context.Context, d container.Engine, ref, what, user string) error {
	switch err := d.Images().Remove(ctx, ref); {
	case container.IsConflict(err):
		p.Kept++
		p.Env.UI.Infof("kept %s%s: %s uses it", termsafe.String(what), p.where, user)
	case err != nil:
		return err
	default:
		p.Removed++
		p.Env.UI.Infof("removed image %s%s", termsafe.String(what), p.where)
	}
	return nil
}

// warm removes the stale warm images and returns, by image id, the warm
// image each remaining one's base is kept for.
func (p *Pruner) warm(ctx context.Context, d container.Engine, warm []container.Image) (map[string]string, error) {
	gone := map[string]bool{}
	for _, img := range StaleWarmImages(warm) {
		before := p.Removed
		if err := p.remove(ctx, d, img.ID, WarmName(img), "a sandbox"); err != nil {
			return nil, err
		}
		gone[img.ID] = p.Removed > before
	}
	// The images the remaining warm images were made on stay: removing
	// their tag would free nothing.
	parentOf := map[string]string{}
	for _, img := range warm {
		if !gone[img.ID] {
			parentOf[img.Labels[LabelWarmBase]] = WarmName(img)
		}
	}
	return parentOf, nil
}

// devcontainer removes the repository's devcontainer images but those a
// remaining warm image was made from.
func (p *Pruner) devcontainer(ctx context.Context, d container.Engine, parentOf map[string]string) error {
	imgs, err := d.Images().List(ctx, devcontainer.LabelRepo+"="+p.Env.Repo.ID)
	if err != nil {
		return err
	}
	for _, img := range imgs {
		if img.Labels[LabelWarm] != "" {
			continue // a warm image inherits its devcontainer image's labels
		}
		if child, ok := parentOf[img.ID]; ok {
			for _, tag := range img.Tags {
				p.Kept++
				p.Env.UI.Infof("kept %s%s: the warm image %s is made from it", termsafe.String(tag), p.where, termsafe.String(child))
			}
			continue
		}
		for _, tag := range img.Tags {
			if err := p.remove(ctx, d, tag, tag, "a sandbox"); err != nil {
				return err
			}
		}
	}
	return nil
}

// cacheVolumes removes the repository's cache volumes no sandbox uses.
func (p *Pruner) cacheVolumes(ctx context.Context, d container.Engine) error {
	caches, err := p.Env.CachesOn(ctx, d)
	if err != nil {
		return err
	}
	for _, cc := range caches {
		switch err := d.RemoveVolume(ctx, cc.Volume); {
		case container.IsConflict(err):
			p.Kept++
			p.Env.UI.Infof("kept cache %s (%s)%s: a sandbox uses it", cc.Volume, termsafe.String(cc.Target), p.where)
		case err != nil:
			return err
		default:
			p.Removed++
			p.Env.UI.Infof("removed cache %s (%s)%s", cc.Volume, termsafe.String(cc.Target), p.where)
		}
	}
	return nil
}

// WarmName is how a warm image is named in messages: its tag, or its
// short id once a newer image took the tag.
func WarmName(img container.Image) string {
	for _, t := range img.Tags {
		if t != "<none>:<none>" {
			return t
		}
	}
	id := strings.TrimPrefix(img.ID, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return "(untagged) " + id
}
