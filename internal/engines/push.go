package engines

import (
	"context"
	"io"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Push is one image to push: the local image Source under the name Ref.
type Push struct{ Source, Ref string }

// PushesFor are the images an engine's Pods pull, from the local images:
// the sandboxes' (image) to the engine's image setting, and git sandbox's
// proxy image (proxyTag, "" when there is none to push) to its
// proxy_image.
func PushesFor(c *config.Engine, image, proxyTag string) ([]Push, error) {
	if c.Image == "" {
		return nil, usererr.New("engine %s names no image to push to", termsafe.String(c.Name)).
			Hint("set image = \"REGISTRY/NAME:TAG\" in [[engine]] %s: the registry its nodes pull from", termsafe.String(c.Name))
	}
	out := []Push{{Source: image, Ref: c.Image}}
	if c.ProxyImage != "" && proxyTag != "" {
		out = append(out, Push{Source: proxyTag, Ref: c.ProxyImage})
	}
	return out, nil
}

// PushAll pushes each image from the local engine, after checking that
// every source is there (nothing is pushed when one is missing).
func PushAll(ctx context.Context, local container.Images, pushes []Push, progress io.Writer) error {
	for _, p := range pushes {
		ok, err := local.Exists(ctx, p.Source)
		if err != nil {
			return err
		}
		if !ok {
			return usererr.New("image %s is not on the local engine", termsafe.String(p.Source)).
				Hint("git sandbox image build makes the default image; --image names another")
		}
	}
	for _, p := range pushes {
		if err := local.Push(ctx, p.Source, p.Ref, progress); err != nil {
			return err
		}
	}
	return nil
}
