package toolchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
)

// CacheTargets lists the configured caches' container directories.
func CacheTargets(caches []config.Cache) []string {
	out := make([]string, 0, len(caches))
	for _, c := range caches {
		out = append(out, path.Clean(c.Target))
	}
	return out
}

// Cache is one of the repository's cache volumes.
type Cache struct {
	Volume string `json:"volume"`
	Target string `json:"target"`
	// Name is the name the repository gave it ("" for a cache of the
	// user's config).
	Name string `json:"name,omitempty"`
}

// CachesOn lists the repository's cache volumes that exist on an engine.
func (e *Env) CachesOn(ctx context.Context, d container.Engine) ([]Cache, error) {
	vols, err := d.ListVolumes(ctx, container.LabelCache+"=1", container.LabelRepo+"="+e.Repo.ID)
	if err != nil {
		return nil, err
	}
	out := make([]Cache, 0, len(vols))
	for _, v := range vols {
		out = append(out, Cache{Volume: v.Name, Target: v.Labels[container.LabelCacheTarget], Name: v.Labels[container.LabelCacheName]})
	}
	return out, nil
}

// EnsureCaches creates the cache volumes spec mounts that do not exist yet,
// each made writable for the sandbox's user (a new volume's directory is
// root's), and makes the mount points of caches inside the agent's home on
// the host as the user, so the engine does not make them as root there.
// A cache volume outlives a failed start: it belongs to the repository's
// sandboxes, not to this one.
func (e *Env) EnsureCaches(ctx context.Context, d container.Engine, spec *container.Spec, agentHome string) error {
	var want []container.Mount
	for _, m := range spec.Mounts {
		if m.Volume {
			want = append(want, m)
		}
	}
	if len(want) == 0 {
		return nil
	}
	have, err := d.ListVolumes(ctx, container.LabelCache+"=1", container.LabelRepo+"="+e.Repo.ID)
	if err != nil {
		return err
	}
	exists := map[string]bool{}
	for _, v := range have {
		exists[v.Name] = true
	}
	named := map[string]string{}
	for _, c := range e.Config.RepoCaches {
		named[container.RepoCacheVolume(e.Repo.ID, c.Name)] = c.Name
	}
	for _, m := range want {
		if rel, ok := strings.CutPrefix(m.Target, container.Home+"/"); ok && agentHome != "" {
			mkdirInside(agentHome, rel)
		}
		if exists[m.Source] {
			continue
		}
		labels := map[string]string{
			container.LabelCache:       "1",
			container.LabelRepo:        e.Repo.ID,
			container.LabelCacheTarget: m.Target,
		}
		if n := named[m.Source]; n != "" {
			labels[container.LabelCacheName] = n
		}
		if _, err := d.CreateVolume(ctx, container.VolumeSpec{Name: m.Source, Labels: labels}); err != nil {
			return fmt.Errorf("cache %s: %w", m.Target, err)
		}
		e.UI.Infof("cache %s: new volume %s", m.Target, m.Source)
		if d.Abilities().VolumesWritable {
			continue
		}
		if err := prepareCache(ctx, d, spec.Image, m.Source); err != nil {
			_ = d.RemoveVolume(context.WithoutCancel(ctx), m.Source)
			return fmt.Errorf("cache %s: %w", m.Target, err)
		}
	}
	return nil
}

// prepareCache opens a new cache volume's top directory to every user, with
// the sticky bit (as /tmp): the sandbox runs as the host user's uid, and
// the engine made the directory root's. The container doing it runs as
// root without any capability (an owner may chmod) and without a network.
func prepareCache(ctx context.Context, d container.Engine, image, volume string) error {
	spec := &container.Spec{
		Image:   image,
		Argv:    []string{"chmod", "1777", "/cache"},
		User:    "0:0",
		Network: container.NetworkNone,
		Limits:  container.Limits{Pids: 16, MemoryBytes: 64 << 20},
		Labels:  map[string]string{container.LabelManaged: "1", container.LabelRole: "probe"},
		Mounts:  []container.Mount{{Source: volume, Target: "/cache", Volume: true}},
	}
	spec.Harden()
	res, err := container.Run(ctx, d, spec, container.RunOptions{})
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	if res.Code != 0 {
		return errors.New("could not make the new volume writable (chmod in the image failed)")
	}
	return nil
}

// mkdirInside creates root/rel directory by directory, never following a
// symbolic link (the agent's home is the agent's to write); anything odd on
// the way and it stops, leaving the rest to the engine.
func mkdirInside(root, rel string) {
	dir := root
	for _, part := range strings.Split(path.Clean(rel), "/") {
		if part == "" || part == "." || part == ".." {
			return
		}
		dir = filepath.Join(dir, part)
		fi, err := os.Lstat(dir)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil:
			return
		case !os.IsNotExist(err):
			return
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return
		}
	}
}
