package enginetest

import (
	"io"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
)

// testImages: the suite's image is there; every image operation either
// works or says ErrNotSupported, as the engine's Abilities declare; and an
// engine that keeps images commits, builds, lists and removes them.
func testImages(x *env) {
	im, ab := x.e.Images(), x.e.Abilities()
	if ok, err := im.Exists(x.ctx, x.s.Image); err != nil || !ok {
		x.Errorf("the suite's image %s: exists = %v, %v", x.s.Image, ok, err)
	}
	absent := x.tag + "-absent:none"
	if _, err := im.Exists(x.ctx, absent); err != nil {
		x.Errorf("exists of a missing image: %v", err)
	}
	_, ok, err := im.Inspect(x.ctx, absent)
	switch {
	case ab.CommitImages || ab.BuildImages:
		if err != nil || ok {
			x.Errorf("inspect of a missing image = %v, %v; want not found, no error", ok, err)
		}
	case !container.IsNotSupported(err) && (err != nil || ok):
		x.Errorf("inspect of a missing image = %v, %v; want not found or ErrNotSupported", ok, err)
	}
	x.commit(im, ab.CommitImages)
	x.buildContext(im, ab.BuildImages)
	if ab.MoveImages {
		r, err := im.Save(x.ctx, x.s.Image)
		if err != nil {
			x.Errorf("save: %v", err)
		} else {
			n, _ := io.CopyN(io.Discard, r, 512)
			r.Close()
			if n == 0 {
				x.Error("save streamed nothing")
			}
		}
	} else {
		if _, err := im.Save(x.ctx, x.s.Image); !container.IsNotSupported(err) {
			x.Errorf("save on an engine that moves no images = %v, want ErrNotSupported", err)
		}
		if err := im.Load(x.ctx, strings.NewReader("")); !container.IsNotSupported(err) {
			x.Errorf("load on an engine that moves no images = %v, want ErrNotSupported", err)
		}
	}
	if _, err := im.List(x.ctx, x.label); err != nil && !container.IsNotSupported(err) {
		x.Errorf("list images: %v", err)
	}
	if err := im.Remove(x.ctx, absent); err != nil && !container.IsNotSupported(err) {
		x.Errorf("remove of a missing image: %v", err)
	}
}

// commit keeps a container as an image, finds it by label, and removes
// it; or, on an engine that cannot, checks that it says so.
func (x *env) commit(im container.Images, can bool) {
	x.Helper()
	id := x.create(x.spec("commit", Program{}))
	if res := x.runToEnd(id); res.Err != nil || res.Code != 0 {
		x.Fatalf("run = %+v", res)
	}
	tag := x.tag + "-commit:1"
	_, err := im.Commit(x.ctx, id, container.CommitOptions{Tag: tag, Labels: map[string]string{container.LabelRepo: x.tag}})
	if !can {
		if !container.IsNotSupported(err) {
			x.Errorf("commit on an engine that cannot = %v, want ErrNotSupported", err)
		}
		return
	}
	if err != nil {
		x.Fatalf("commit: %v", err)
	}
	x.Cleanup(func() { _ = im.Remove(x.ctx, tag) })
	info, ok, err := im.Inspect(x.ctx, tag)
	if err != nil || !ok || info.ID == "" || info.Labels[container.LabelRepo] != x.tag {
		x.Errorf("inspect the commit = %+v, %v, %v", info, ok, err)
	}
	list, err := im.List(x.ctx, x.label)
	if err != nil || len(list) != 1 || list[0].ID != info.ID {
		x.Errorf("list images = %+v, %v; want the commit", list, err)
	}
	if err := x.e.Remove(x.ctx, id); err != nil {
		x.Fatal(err)
	}
	if err := im.Remove(x.ctx, tag); err != nil {
		x.Errorf("remove the commit: %v", err)
	}
	if _, ok, err := im.Inspect(x.ctx, tag); ok || err != nil {
		x.Errorf("the removed commit: %v, %v", ok, err)
	}
}

// buildContext builds a label on the suite's image and removes it; or,
// on an engine that cannot, checks that it says so.
func (x *env) buildContext(im container.Images, can bool) {
	x.Helper()
	tag := x.tag + "-build:1"
	dockerfile := "FROM " + x.s.Image + "\nLABEL " + container.LabelRepo + "=" + x.tag + "\n"
	id, err := im.BuildContext(x.ctx, container.ContextBuild{
		Context: container.DockerfileContext([]byte(dockerfile)), Dockerfile: "Dockerfile", Tags: []string{tag},
	})
	if !can {
		if !container.IsNotSupported(err) {
			x.Errorf("build on an engine that cannot = %v, want ErrNotSupported", err)
		}
		return
	}
	if err != nil {
		x.Fatalf("build: %v", err)
	}
	x.Cleanup(func() { _ = im.Remove(x.ctx, tag) })
	if info, ok, err := im.Inspect(x.ctx, tag); err != nil || !ok || info.ID != id || info.Labels[container.LabelRepo] != x.tag {
		x.Errorf("inspect the build = %+v, %v, %v; want id %s", info, ok, err, id)
	}
	if err := im.Remove(x.ctx, tag); err != nil {
		x.Errorf("remove the build: %v", err)
	}
}
