package network

// The egress proxy's image on an engine: git sandbox's own binary and
// nothing else (internal/proxyimage), loaded from an archive the first
// time an engine needs it, never from any image a repository, a
// devcontainer or a setup names.

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// ProxyBinaryCache is the file that keeps the running binary's hash (its
// proxy image's tag) across commands.
func ProxyBinaryCache(stateRoot string) string {
	return filepath.Join(stateRoot, ".proxy-binary.json")
}

// proxyBinaryOf returns the binary the proxy runs: this one, checked to
// run alone in its image (tests name another in e.ProxyBinary).
func (e *Env) proxyBinaryOf() (proxyimage.Binary, error) {
	if e.ProxyBinary != nil {
		return e.ProxyBinary.ProxyBinary()
	}
	return proxyimage.Self(ProxyBinaryCache(e.Layout.Root))
}

// EnsureProxyImage makes the proxy image of b on the engine unless it has
// it, and returns its tag. A Kubernetes engine says it has every image
// (what its nodes hold shows when a Pod starts), so nothing is loaded
// there; an engine that can neither say so nor load images is told to.
func EnsureProxyImage(ctx context.Context, d Engine, b proxyimage.Binary, p *ui.Printer) (string, error) {
	tag := b.Tag()
	im := d.Images()
	ok, err := im.Exists(ctx, tag)
	if err != nil || ok {
		return tag, err
	}
	if !d.Abilities().MoveImages {
		return "", usererr.New("the %s engine lacks the egress proxy's image %s and cannot load one", d.Abilities().Kind, tag).
			Hint("git sandbox image proxy makes it on a Docker engine; copy it onto this one, or start with --network none or open")
	}
	step := p.Step("making the egress proxy's image %s", termsafe.String(tag))
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(proxyimage.WriteArchive(pw, b)) }()
	err = im.Load(ctx, pr)
	pr.CloseWithError(err)
	if err != nil {
		step.Fail()
		return "", fmt.Errorf("make the egress proxy's image %s: %w", tag, err)
	}
	if ok, err := im.Exists(ctx, tag); err != nil || !ok {
		step.Fail()
		return "", fmt.Errorf("make the egress proxy's image %s: the engine loaded it but does not have it (%v)", tag, err)
	}
	step.Done("made the egress proxy's image %s", termsafe.String(tag))
	return tag, nil
}
