package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"

	"github.com/docker/docker/api/types/volume"
)

// VolumeSpec describes a named volume: storage that lives in the engine,
// not on the host's file system (what a remote engine mounts instead of a
// host directory).
type VolumeSpec struct {
	Name   string
	Labels map[string]string
}

// Volume is a volume that exists.
type Volume struct {
	Name   string
	Labels map[string]string
}

// CreateVolume creates a volume, stamped as managed by git sandbox.
func (d *Docker) CreateVolume(ctx context.Context, s VolumeSpec) (*Volume, error) {
	v, err := d.api.VolumeCreate(ctx, volume.CreateOptions{Name: s.Name, Labels: managedLabels(s.Labels)})
	if err != nil {
		return nil, fmt.Errorf("create volume %s: %w", s.Name, sdkErr(err))
	}
	return &Volume{Name: v.Name, Labels: v.Labels}, nil
}

// RemoveVolume removes a volume; a missing one is not an error, one still
// in use is ErrConflict.
func (d *Docker) RemoveVolume(ctx context.Context, name string) error {
	err := sdkErr(d.api.VolumeRemove(ctx, name, false))
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	return nil
}

// ListVolumes returns the managed volumes carrying every given label.
func (d *Docker) ListVolumes(ctx context.Context, labels ...string) ([]Volume, error) {
	resp, err := d.api.VolumeList(ctx, volume.ListOptions{Filters: managedFilter(labels)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", sdkErr(err))
	}
	out := make([]Volume, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		out = append(out, Volume{Name: v.Name, Labels: v.Labels})
	}
	return out, nil
}

// managedLabels returns labels with LabelManaged set, so the list calls,
// which only ever see managed objects, find it.
func managedLabels(labels map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
	}
	if out[LabelManaged] == "" {
		out[LabelManaged] = "1"
	}
	return out
}

// Labels of cache volumes (besides LabelManaged and LabelRepo).
const (
	// LabelCache marks a cache volume.
	LabelCache = "git-sandbox.cache"
	// LabelCacheTarget is the container directory it holds.
	LabelCacheTarget = "git-sandbox.cache.target"
	// LabelCacheName is the name a repository gave its own cache
	// (absent on the caches of the user's config).
	LabelCacheName = "git-sandbox.cache.name"
)

// CacheVolume names the volume that holds a repository's cache of target:
// readable, valid for Docker, and distinct per repository and target.
func CacheVolume(repoID, target string) string {
	sum := sha256.Sum256([]byte(repoID + "\x00" + path.Clean(target)))
	r := strings.Trim(nameUnsafe.ReplaceAllString(repoID, "-"), "-.")
	if len(r) > 40 {
		r = r[:40]
	}
	t := strings.Trim(nameUnsafe.ReplaceAllString(path.Base(path.Clean(target)), "-"), "-.")
	if len(t) > 24 {
		t = t[:24]
	}
	return fmt.Sprintf("git-sandbox-cache-%s-%s-%s", r, t, hex.EncodeToString(sum[:])[:12])
}

// RepoCacheVolume names the volume of a cache a repository names itself:
// distinct per repository and name, and from every CacheVolume.
func RepoCacheVolume(repoID, name string) string {
	sum := sha256.Sum256([]byte(repoID + "\x00repo-cache\x00" + name))
	r := strings.Trim(nameUnsafe.ReplaceAllString(repoID, "-"), "-.")
	if len(r) > 40 {
		r = r[:40]
	}
	n := strings.Trim(nameUnsafe.ReplaceAllString(name, "-"), "-.")
	if len(n) > 24 {
		n = n[:24]
	}
	return fmt.Sprintf("git-sandbox-rcache-%s-%s-%s", r, n, hex.EncodeToString(sum[:])[:12])
}

// VolumesWritable reports whether an engine's new volumes are writable by
// a sandbox's user as they come (a Kubernetes engine's claims: the Pod's
// group owns them), so that no container of root's need open them first.
func VolumesWritable(engine any) bool {
	w, ok := engine.(interface{ VolumesWritable() bool })
	return ok && w.VolumesWritable()
}
