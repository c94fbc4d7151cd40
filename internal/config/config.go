// Package config loads git sandbox's settings and decides how far each
// source is trusted.
//
// The user's own file (~/.config/git-sandbox/config.toml) is trusted: it may
// add mounts, pass environment variables through, open the network and pick
// an OCI runtime. The repository's .sandbox.toml comes from the repository,
// which may be hostile: it may choose the agent, image, setup and verify
// commands and may only tighten limits. A key it is not allowed to set is
// refused with a message naming it.
package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// defaultImage is the image git sandbox builds and uses unless told otherwise.
const defaultImage = "git-sandbox:latest"

// DefaultImageEnv names the environment variable that gives the default
// image another name. It is meant for test suites (which must never build
// over a user's git-sandbox:latest) and for packagers; everything the
// default image gets — built by start when missing, named in hints — then
// applies to that name instead.
const DefaultImageEnv = "GIT_SANDBOX_DEFAULT_IMAGE"

// DefaultImage is the image git sandbox builds itself and uses unless told
// otherwise: git-sandbox:latest, or $GIT_SANDBOX_DEFAULT_IMAGE when that
// is set to a name without spaces or control characters.
func DefaultImage() string {
	v := os.Getenv(DefaultImageEnv)
	if v == "" || strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return defaultImage
	}
	return v
}

// DefaultBaseImage is what the default image is built from.
const DefaultBaseImage = "debian:bookworm-slim"

// RepoFile is the repository's (untrusted) config file name.
const RepoFile = ".sandbox.toml"

// Config is the effective configuration.
type Config struct {
	// Agent is the default agent adapter: claude, codex or shell.
	Agent string `toml:"agent"`
	// Image is the container image sandboxes run.
	Image string `toml:"image"`
	// BaseImage is what `git sandbox image build` builds the default image from.
	BaseImage string `toml:"base_image"`
	// Setup runs once in a new sandbox's container before the agent.
	Setup string `toml:"setup"`
	// Verify is the definition of done, run in a fresh container.
	Verify string `toml:"verify"`
	// Network is the container network (container.NetworkModes).
	Network container.NetworkMode `toml:"network"`
	// Runtime is an optional OCI runtime such as runsc or kata-runtime.
	Runtime string `toml:"runtime"`
	// Env lists host environment variables passed to the agent (KEY or KEY=VALUE).
	Env []string `toml:"env"`
	// Mounts are extra bind mounts.
	Mounts []Mount `toml:"mount"`
	// Caches are container directories kept in volumes shared by the
	// sandboxes of one repository.
	Caches []Cache `toml:"cache"`
	// Limits are the container's resource limits.
	Limits Limits `toml:"limits"`
	// Rescue configures snapshots.
	Rescue Rescue `toml:"rescue"`
	// WorktreesDir, when set, is where sandbox worktrees are created.
	WorktreesDir string `toml:"worktrees_dir"`
	// VerifyBeforePush makes the pre-push hook run verify on pushed commits.
	VerifyBeforePush bool `toml:"verify_before_push"`
	// Hooks configures the pre-push hook.
	Hooks Hooks `toml:"hooks"`
}

// Mount is an extra bind mount from the user's own config.
type Mount struct {
	Source   string `toml:"source"`
	Target   string `toml:"target"`
	ReadOnly bool   `toml:"readonly"`
}

// Cache is a container directory (a package or build cache) kept in a
// volume per repository, shared by that repository's sandboxes.
type Cache struct {
	Target string `toml:"target"`
}

// Limits are resource limits of a sandbox container.
type Limits struct {
	// Memory is a size such as "4g"; "0" means no limit.
	Memory string `toml:"memory"`
	// CPUs is a number of CPUs such as 1.5.
	CPUs float64 `toml:"cpus"`
	// Pids is the maximum number of processes.
	Pids int64 `toml:"pids"`
}

// Rescue configures snapshots.
type Rescue struct {
	// Interval is the time between periodic snapshots, e.g. "2m".
	Interval Duration `toml:"interval"`
}

// Hooks configures the pre-push hook.
type Hooks struct {
	// AllowPushWithoutBinary lets a push through when git-sandbox is missing.
	AllowPushWithoutBinary bool `toml:"allow_push_without_binary"`
}

// Duration is a time.Duration written as "90s", "2m", "1h" or "14d".
type Duration struct{ time.Duration }

// UnmarshalText parses a duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	d.Duration = v
	return err
}

// MarshalText formats a duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// ParseDuration is time.ParseDuration plus the units d (days) and w (weeks).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			f, err := strconv.ParseFloat(n, 64)
			if err != nil || f < 0 {
				return 0, fmt.Errorf("invalid duration %q", s)
			}
			return time.Duration(f * float64(unit)), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q", s)
	}
	return d, nil
}

// Defaults returns the built-in configuration.
func Defaults() Config {
	return Config{
		Agent:     "claude",
		Image:     DefaultImage(),
		BaseImage: DefaultBaseImage,
		Network:   container.NetworkBridge,
		Limits: Limits{
			Memory: "8g",
			CPUs:   float64(runtime.NumCPU()),
			Pids:   4096,
		},
		Rescue: Rescue{Interval: Duration{2 * time.Minute}},
	}
}

// Loaded is the effective configuration and where it came from.
type Loaded struct {
	Config
	// UserFile and RepoFile are the files read ("" when absent).
	UserFile, RepoFile string
	// Warnings are settings that were ignored, for the user to read.
	Warnings []string
}

// UserPath is the user's config file: $GIT_SANDBOX_CONFIG, else
// ${XDG_CONFIG_HOME:-~/.config}/git-sandbox/config.toml.
func UserPath() string {
	if p := os.Getenv("GIT_SANDBOX_CONFIG"); p != "" {
		return p
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "git-sandbox", "config.toml")
}

// Load reads the user's config and, when repoDir is set, the repository's
// .sandbox.toml in it, and merges them over the defaults.
func Load(repoDir string) (*Loaded, error) {
	l := &Loaded{Config: Defaults()}
	if p := UserPath(); p != "" {
		ok, err := decodeFile(p, &l.Config, nil)
		if err != nil {
			return nil, err
		}
		if ok {
			l.UserFile = p
		}
	}
	if err := l.validate(l.UserFile); err != nil {
		return nil, err
	}
	if repoDir == "" {
		return l, nil
	}
	p := filepath.Join(repoDir, RepoFile)
	var repo Config
	ok, err := decodeFile(p, &repo, checkRepoKeys)
	if err != nil {
		return nil, err
	}
	if ok {
		l.RepoFile = p
		if repo.Network != "" && repo.Network.Validate() != nil {
			return nil, usererr.New("%s sets \"network\" = %q: must be %s", p, repo.Network, container.NetworkModeNames()).
				Hint("host networking is never offered: it would give the agent the host's services")
		}
		if repo.Network != "" && !repo.Network.AtMostAsOpenAs(l.Network) {
			return nil, usererr.New("%s sets \"network\" = %q: a repository's config may only tighten the network (%s, most closed first)", p, repo.Network, container.NetworkModeNames()).
				Hint("only your own config (%s) or --network can open the network", UserPath())
		}
		l.applyRepo(repo)
		if err := l.validate(p); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// decodeFile decodes a TOML file into c. A missing file is not an error.
// check, if set, vets the keys the file defines.
func decodeFile(path string, c *Config, check func(path string, md toml.MetaData) error) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read config: %w", err)
	}
	md, err := toml.Decode(string(b), c)
	if err != nil {
		return false, usererr.Wrap(err, "%s: %v", path, err).Hint("fix the file; every key is described in .sandbox.toml.example")
	}
	if check != nil {
		if err := check(path, md); err != nil {
			return false, err
		}
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		sort.Strings(keys)
		return false, usererr.New("%s: unknown key %s", path, strings.Join(keys, ", ")).
			Hint("every key is described in .sandbox.toml.example")
	}
	return true, nil
}

// repoRefused are keys a repository's config may never set, with why.
var repoRefused = map[string]string{
	"mount":              "mounts of host paths",
	"env":                "passing host environment variables",
	"runtime":            "choosing the container runtime",
	"base_image":         "choosing what the shared default image is built from",
	"worktrees_dir":      "choosing where worktrees are created on the host",
	"hooks":              "pre-push hook settings",
	"verify_before_push": "pre-push settings",
	"privileged":         "privileged containers (never allowed anywhere)",
	"cap_add":            "adding capabilities (never allowed anywhere)",
	"devices":            "host devices",
	"volumes":            "volumes",
	"cache":              "cache volumes shared by every sandbox of the repository",
	"user":               "the container user",
	"security_opt":       "security options",
}

func checkRepoKeys(path string, md toml.MetaData) error {
	for _, k := range md.Keys() {
		top := k[0]
		if why, ok := repoRefused[top]; ok {
			return usererr.New("%s sets %q: a repository's config may not ask for %s", path, top, why).
				Hint("only your own config (%s) or a command-line flag can set %s; remove it from %s", UserPath(), top, RepoFile)
		}
	}
	return nil
}

// applyRepo folds the repository's settings in, keeping only what a
// repository may choose and only limits that are tighter.
func (l *Loaded) applyRepo(r Config) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&l.Agent, r.Agent)
	set(&l.Image, r.Image)
	set(&l.Setup, r.Setup)
	set(&l.Verify, r.Verify)
	if r.Network != "" && r.Network.AtMostAsOpenAs(l.Network) {
		l.Network = r.Network
	}
	if r.Limits.Memory != "" {
		if tighterMemory(r.Limits.Memory, l.Limits.Memory) {
			l.Limits.Memory = r.Limits.Memory
		} else {
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s: limits.memory = %q ignored: a repository may only tighten limits", RepoFile, r.Limits.Memory))
		}
	}
	if r.Limits.CPUs > 0 {
		if l.Limits.CPUs <= 0 || r.Limits.CPUs < l.Limits.CPUs {
			l.Limits.CPUs = r.Limits.CPUs
		} else if r.Limits.CPUs > l.Limits.CPUs {
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s: limits.cpus = %g ignored: a repository may only tighten limits", RepoFile, r.Limits.CPUs))
		}
	}
	if r.Limits.Pids > 0 {
		if l.Limits.Pids <= 0 || r.Limits.Pids < l.Limits.Pids {
			l.Limits.Pids = r.Limits.Pids
		} else if r.Limits.Pids > l.Limits.Pids {
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s: limits.pids = %d ignored: a repository may only tighten limits", RepoFile, r.Limits.Pids))
		}
	}
	if r.Rescue.Interval.Duration > 0 && r.Rescue.Interval.Duration < l.Rescue.Interval.Duration {
		l.Rescue.Interval = r.Rescue.Interval
	}
}

func tighterMemory(repo, user string) bool {
	r, err := MemoryBytes(repo)
	if err != nil || r <= 0 {
		return false
	}
	u, err := MemoryBytes(user)
	if err != nil || u <= 0 {
		return true
	}
	return r < u
}

// MemoryBytes parses a memory size such as "512m" or "8g"; "" and "0" are 0.
func MemoryBytes(s string) (int64, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	return units.RAMInBytes(s)
}

func (l *Loaded) validate(file string) error {
	where := file
	if where == "" {
		where = "configuration"
	}
	if l.Network.Validate() != nil {
		return usererr.New("%s: \"network\" = %q: must be %s", where, l.Network, container.NetworkModeNames()).
			Hint("host networking is never offered: it would give the agent the host's services")
	}
	if _, err := MemoryBytes(l.Limits.Memory); err != nil {
		return usererr.New("%s: limits.memory = %q: %v", where, l.Limits.Memory, err)
	}
	for _, m := range l.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return usererr.New("%s: mount %q -> %q: source and target must be absolute paths", where, m.Source, m.Target)
		}
	}
	seen := map[string]bool{}
	for _, c := range l.Caches {
		t := path.Clean(c.Target)
		switch {
		case !path.IsAbs(c.Target):
			return usererr.New("%s: cache target %q must be an absolute path in the container", where, c.Target)
		case t == "/" || t == container.Home || t == container.Workspace || strings.HasPrefix(t, container.Workspace+"/"):
			return usererr.New("%s: cache target %q: a cache cannot be /, the home directory or in /workspace", where, c.Target).
				Hint("name the cache's own directory, such as %s/go/pkg/mod", container.Home)
		case strings.ContainsAny(t, ",\x00\n"):
			return usererr.New("%s: cache target %q: commas and control characters are not supported", where, c.Target)
		case seen[t]:
			return usererr.New("%s: cache target %q is listed twice", where, c.Target)
		}
		seen[t] = true
	}
	return nil
}
