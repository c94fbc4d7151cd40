package container

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
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
