// Package config loads git sandbox's settings and decides how far each
// source is trusted.
//
// The user's own file (~/.config/git-sandbox/config.toml) is trusted: it may
// add mounts, pass environment variables through, open the network, add
// hosts to the allow list and pick an OCI runtime. The repository's
// .sandbox.toml comes from the repository, which may be hostile: it may
// choose the agent, image, setup and verify commands, the setup inputs
// that key a warm image, caches of its own ([[repo_cache]]), may only
// tighten limits, and may only remove hosts from the allow list (deny) or choose no
// network at all. A key it is not allowed to set is
// refused with a message naming it.
package config

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/meter"
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
	// SetupInputs are files (or directories) of the repository, as paths
	// from its root, whose contents decide whether setup's kept result
	// (a warm image) still fits: go.sum, package-lock.json, uv.lock.
	SetupInputs []string `toml:"setup_inputs"`
	// Verify is the definition of done, run in a fresh container.
	Verify string `toml:"verify"`
	// Network is the container network (container.NetworkModes).
	Network container.NetworkMode `toml:"network"`
	// Allow lists the hosts (HOST[:PORT], *.SUFFIX, an IP address) the
	// agent may reach in allowlist mode, on top of its adapter's.
	Allow []string `toml:"allow"`
	// Deny removes hosts from the allow list, whoever added them.
	Deny []string `toml:"deny"`
	// Repositories are allow and deny entries of the user's for one
	// repository only (user config only; git sandbox net allow --repo
	// appends them).
	Repositories []RepoEgress `toml:"repository"`
	// EgressNetwork is the engine network egress proxies leave by (user
	// config only); empty means git sandbox's own shared one.
	EgressNetwork string `toml:"egress_network"`
	// NetworkPrompt holds a connection to a host off the allow list until
	// the user answers (git sandbox dash, net pending / net allow) or
	// NetworkPromptTimeout passes, instead of refusing it at once (user
	// config only: a repository must not be able to turn it on).
	NetworkPrompt        bool     `toml:"network_prompt"`
	NetworkPromptTimeout Duration `toml:"network_prompt_timeout"`
	// VerifyAllow gives the verify container an allow list of its own;
	// without it verify runs with no network.
	VerifyAllow []string `toml:"verify_allow"`
	// Secrets are credentials the agent uses without seeing them (user
	// config only): its container holds a placeholder, the egress proxy
	// puts the real value in requests to the secret's hosts.
	Secrets []Secret `toml:"secret"`
	// Hosts say how the egress proxy treats a host (user config only):
	// inspect = true terminates its TLS, so method and path rules apply.
	Hosts []Host `toml:"host"`
	// UpstreamCA is a PEM file of extra certificate authorities the egress
	// proxy trusts for the servers a secret goes to (a company's TLS
	// inspection, a test server), on top of this machine's roots.
	UpstreamCA string `toml:"upstream_ca"`
	// Runtime is an optional OCI runtime such as runsc or kata-runtime.
	Runtime string `toml:"runtime"`
	// Env lists host environment variables passed to the agent (KEY or KEY=VALUE).
	Env []string `toml:"env"`
	// Mounts are extra bind mounts.
	Mounts []Mount `toml:"mount"`
	// Caches are container directories kept in volumes shared by the
	// sandboxes of one repository.
	Caches []Cache `toml:"cache"`
	// RepoCaches are the caches a repository's .sandbox.toml names itself
	// (only there): volumes of that repository, like Caches.
	RepoCaches []RepoCache `toml:"repo_cache"`
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
	// AllowedImages are images a repository's .sandbox.toml may choose
	// (user config only): any other image it names needs the user's yes.
	AllowedImages []string `toml:"allowed_images"`
	// Budget bounds the host memory and disk spent on what an agent hands
	// back, and what a sandbox may spend on model calls.
	Budget Budget `toml:"budget"`
	// Prices are the user's prices of models (user config only), before
	// the built-in table.
	Prices []meter.Price `toml:"price,omitempty"`
	// AgentHome says where an agent's login persists: AgentHomePerAgent
	// (one login per agent, shared by every repository) or
	// AgentHomePerRepo (one per agent and repository). User config only.
	AgentHome string `toml:"agent_home"`
	// Notify is how the supervisor tells the user about a sandbox's events
	// (user config only): "desktop", a shell command, or "" for nothing.
	Notify string `toml:"notify"`
	// Engines are container engines besides the one the environment
	// names (user config only).
	Engines []Engine `toml:"engine,omitempty"`
	// DefaultEngine is the engine a new sandbox runs on without --engine:
	// "" for the environment's, an engine's name, or "auto" for the one
	// with the most memory left (user config only).
	DefaultEngine string `toml:"default_engine,omitempty"`
	// MCP is what git sandbox mcp lets the agent you talk to do (user
	// config only).
	MCP MCP `toml:"mcp"`
}

// MCP configures git sandbox mcp, the server a lead agent on this machine
// hands out tasks through. Only the user's own config sets it: a
// repository must not be able to let an agent land.
type MCP struct {
	// AllowLand lets the sandbox_land tool land; without it the tool
	// answers with the git sandbox land command for the user to run.
	AllowLand bool `toml:"allow_land"`
	// Tools, when set, are the only tools the server offers.
	Tools []string `toml:"tools,omitempty"`
}

// Values of agent_home.
const (
	AgentHomePerAgent = "per-agent"
	AgentHomePerRepo  = "per-repo"
)

// Budget bounds what git sandbox spends on the host for an agent's work.
// Each is a size such as "2g"; "0" means no bound.
type Budget struct {
	// SyncObject is the largest object (file) one sync takes from the
	// agent's commits.
	SyncObject string `toml:"sync_object"`
	// Sync is the total of the new objects one sync takes.
	Sync string `toml:"sync"`
	// Export is the total size of the files verify writes out for one tree.
	Export string `toml:"export"`
	// Snapshots is the total size of the files one sandbox's snapshots may
	// write into the object store; once spent, interval snapshots stop
	// (those of exit, stop, land, rm and the user's own still run).
	Snapshots string `toml:"snapshots"`
	// Model is the dollars each sandbox may spend on model calls through
	// the credential broker ("5.00"); ModelTokens the tokens. Unset: no
	// bound.
	Model       string `toml:"model,omitempty"`
	ModelTokens int64  `toml:"model_tokens,omitzero"`
}

// Secret is a credential given to the agent as a placeholder: the real
// value comes from exactly one of FromEnv (a variable of git sandbox's
// own environment), FromFile (a file's content, one trailing line break
// dropped) or FromCommand (what the command prints, run by /bin/sh when
// the sandbox starts or resumes), and only ever goes to Hosts.
type Secret struct {
	// Name is the variable the agent's container gets the placeholder in.
	Name string `toml:"name"`
	// Hosts are the allow-list entries the value may be sent to (names,
	// not addresses; port 443 unless one is given).
	Hosts       []string `toml:"hosts"`
	FromEnv     string   `toml:"from_env,omitempty"`
	FromFile    string   `toml:"from_file,omitempty"`
	FromCommand string   `toml:"from_command,omitempty"`
}

// Source describes where the secret's value comes from, for messages
// (never the value).
func (s Secret) Source() string {
	switch {
	case s.FromEnv != "":
		return "from_env " + s.FromEnv
	case s.FromFile != "":
		return "from_file " + s.FromFile
	default:
		return "from_command"
	}
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

// RepoCache is a cache a repository asks for by name: a container
// directory kept in a volume of that repository's.
type RepoCache struct {
	Name   string `toml:"name"`
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
	// MaxFileSize is the largest untracked file a snapshot takes, such as
	// "50m"; "0" takes every file.
	MaxFileSize string `toml:"max_file_size"`
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
		Network:   container.NetworkAllowlist,
		Limits: Limits{
			Memory: "8g",
			CPUs:   float64(runtime.NumCPU()),
			Pids:   4096,
		},
		Rescue: Rescue{Interval: Duration{2 * time.Minute}, MaxFileSize: "50m"},

		NetworkPromptTimeout: Duration{DefaultPromptTimeout},
		Budget:               Budget{SyncObject: "100m", Sync: "2g", Export: "2g", Snapshots: "2g"},
		AgentHome:            AgentHomePerAgent,
	}
}

// Loaded is the effective configuration and where it came from.
type Loaded struct {
	Config
	// UserFile and RepoFile are the files read ("" when absent).
	UserFile, RepoFile string
	// Warnings are settings that were ignored, for the user to read.
	Warnings []string
	// RepoImage is the image the repository's .sandbox.toml chose over
	// the user's ("" when it chose none, or the same).
	RepoImage string
	// UserImage is the image setting before the repository's file was
	// read: the user's own, or the default.
	UserImage string
	// repoImageLine is the line of .sandbox.toml that chose RepoImage.
	repoImageLine int
	// RepoDeny is the repository's deny list (Deny is the user's).
	RepoDeny []string
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
		ok, err := decodeFile(p, &l.Config, nil, false)
		if err != nil {
			return nil, err
		}
		if ok {
			l.UserFile = p
		}
	}
	l.UserImage = l.Image
	if len(l.RepoCaches) > 0 {
		return nil, usererr.New("%s sets \"repo_cache\": that key is for a repository's %s", l.UserFile, RepoFile).
			Hint("a cache of your own is a [[cache]] with a target")
	}
	l.applyRepoEgress(repoDir)
	if err := l.validate(l.UserFile); err != nil {
		return nil, err
	}
	fillKubernetesDefaults(l.Engines)
	if repoDir == "" {
		return l, nil
	}
	p := filepath.Join(repoDir, RepoFile)
	var repo Config
	ok, err := decodeFile(p, &repo, checkRepoKeys, true)
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
		userImage := l.Image
		l.applyRepo(repo)
		if repo.Image != "" && repo.Image != userImage {
			l.RepoImage = repo.Image
			l.repoImageLine = imageKeyLine(p)
		}
		if err := l.validate(p); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// decodeFile decodes a TOML file into c. A missing file is not an error.
// check, if set, vets the keys the file defines.
func decodeFile(path string, c *Config, check func(path string, md toml.MetaData) error, repo bool) (bool, error) {
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
	if err := checkValues(path, c, md, repo); err != nil {
		return false, err
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
	"allow":                  "hosts on the network allow list (it may remove them with deny)",
	"verify_allow":           "network access for verify",
	"network_prompt":         "holding unlisted connections for your approval",
	"network_prompt_timeout": "holding unlisted connections for your approval",
	"repository":             "hosts on the network allow list (the user's [[repository]] tables)",
	"secret":                 "credentials (a secret and the hosts it may go to are yours to name)",
	"host":                   "hosts whose TLS the egress proxy terminates",
	"upstream_ca":            "certificate authorities the egress proxy trusts",
	"agent_home":             "where agent logins are kept",
	"egress_network":         "the network the egress proxies leave by",
	"mount":                  "mounts of host paths",
	"env":                    "passing host environment variables",
	"runtime":                "choosing the container runtime",
	"base_image":             "choosing what the shared default image is built from",
	"worktrees_dir":          "choosing where worktrees are created on the host",
	"hooks":                  "pre-push hook settings",
	"verify_before_push":     "pre-push settings",
	"allowed_images":         "allowing images",
	"budget":                 "the host's memory and disk budgets, or what a sandbox may spend on models",
	"price":                  "the prices of models (what a sandbox's spend and budget are counted in)",
	"notify":                 "running a command on the host when a sandbox's state changes",
	"engine":                 "container engines",
	"default_engine":         "choosing the container engine",
	"mcp":                    "what an agent may do through git sandbox mcp (landing, its tools)",
	"privileged":             "privileged containers (never allowed anywhere)",
	"cap_add":                "adding capabilities (never allowed anywhere)",
	"devices":                "host devices",
	"volumes":                "volumes",
	"cache":                  "your cache volumes (it names caches of its own with [[repo_cache]])",
	"user":                   "the container user",
	"security_opt":           "security options",
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
	if r.SetupInputs != nil {
		l.SetupInputs = r.SetupInputs
	}
	user := map[string]bool{}
	for _, c := range l.Caches {
		user[path.Clean(c.Target)] = true
	}
	for _, c := range r.RepoCaches {
		if user[path.Clean(c.Target)] {
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s: repo_cache %q ignored: your own [[cache]] already keeps %s", RepoFile, c.Name, path.Clean(c.Target)))
			continue
		}
		l.RepoCaches = append(l.RepoCaches, c)
	}
	set(&l.Verify, r.Verify)
	if r.Network != "" && r.Network.AtMostAsOpenAs(l.Network) {
		l.Network = r.Network
	}
	l.RepoDeny = r.Deny
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
	if r.Rescue.MaxFileSize != "" {
		rn, _ := FileSizeBytes(r.Rescue.MaxFileSize)
		un, _ := FileSizeBytes(l.Rescue.MaxFileSize)
		if rn > 0 && (un == 0 || rn < un) {
			l.Rescue.MaxFileSize = r.Rescue.MaxFileSize
		} else if rn != un {
			l.Warnings = append(l.Warnings, fmt.Sprintf("%s: rescue.max_file_size = %q ignored: a repository may only lower it", RepoFile, r.Rescue.MaxFileSize))
		}
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

// validate checks the configuration as merged so far; errors name file,
// the one merged last ("configuration" when there is none).
func (l *Loaded) validate(file string) error {
	where := file
	if where == "" {
		where = "configuration"
	}
	if err := l.validateRuntime(where); err != nil {
		return err
	}
	if err := l.validateEgress(where); err != nil {
		return err
	}
	if l.AgentHome != AgentHomePerAgent && l.AgentHome != AgentHomePerRepo {
		return usererr.New("%s: agent_home = %q: must be %q or %q", where, l.AgentHome, AgentHomePerAgent, AgentHomePerRepo)
	}
	if err := checkSecrets(where, l.Secrets); err != nil {
		return err
	}
	if err := checkHosts(where, l.Hosts); err != nil {
		return err
	}
	if err := l.validateSpend(where); err != nil {
		return err
	}
	if l.UpstreamCA != "" && !filepath.IsAbs(l.UpstreamCA) {
		return usererr.New("%s: upstream_ca %q must be an absolute path", where, l.UpstreamCA)
	}
	return l.validateMounts(where)
}

// validateRuntime checks what a sandbox runs with: its network, its
// memory limit, the engines and the budget's sizes.
func (l *Loaded) validateRuntime(where string) error {
	if err := l.Network.Validate(); err != nil {
		return usererr.New("%s: %v", where, err).
			Hint("host networking is never offered: it would give the agent the host's services")
	}
	if _, err := MemoryBytes(l.Limits.Memory); err != nil {
		return usererr.New("%s: limits.memory = %q: %v", where, l.Limits.Memory, err)
	}
	if err := validateEngines(where, l.Engines, l.DefaultEngine); err != nil {
		return err
	}
	for key, v := range map[string]string{"sync_object": l.Budget.SyncObject, "sync": l.Budget.Sync, "export": l.Budget.Export, "snapshots": l.Budget.Snapshots} {
		if _, err := MemoryBytes(v); err != nil {
			return usererr.New("%s: budget.%s = %q: %v", where, key, v, err).Hint("give a size such as \"2g\", or \"0\" for no bound")
		}
	}
	return nil
}

// validateEgress checks the entries of the egress lists: the user's
// allow, deny and verify_allow, and the repository's deny.
func (l *Loaded) validateEgress(where string) error {
	for key, list := range map[string][]string{"allow": l.Allow, "deny": l.Deny, "verify_allow": l.VerifyAllow} {
		parse := egress.ParseEntry // a removal, and verify's list, name hosts only
		if key == "allow" {
			parse = egress.ParseAllowEntry
		}
		for _, entry := range list {
			if _, err := parse(entry, egress.FromUser); err != nil {
				return usererr.Wrap(err, "%s: %s: %v", where, key, err).Hint("entries look like api.example.com, *.example.com, example.com:8443 or 192.0.2.7")
			}
		}
	}
	for _, entry := range l.RepoDeny {
		if _, err := egress.ParseEntry(entry, egress.FromRepository); err != nil {
			return usererr.Wrap(err, "%s: deny: %v", where, err).Hint("entries look like api.example.com, *.example.com, example.com:8443 or 192.0.2.7")
		}
	}
	return nil
}

// validateMounts checks what is mounted into a sandbox or fills it: the
// mounts, the caches, the setup inputs and the repository's caches, no
// two caches on one target.
func (l *Loaded) validateMounts(where string) error {
	for _, m := range l.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return usererr.New("%s: mount %q -> %q: source and target must be absolute paths", where, m.Source, m.Target)
		}
	}
	seen, err := l.validateCaches(where)
	if err != nil {
		return err
	}
	if len(l.SetupInputs) > maxSetupInputs {
		return usererr.New("%s: setup_inputs lists %d paths; at most %d", where, len(l.SetupInputs), maxSetupInputs).
			Hint("name a directory to cover the files in it")
	}
	for _, in := range l.SetupInputs {
		if err := CheckSetupInput(in); err != nil {
			return usererr.New("%s: setup_inputs: %v", where, err).
				Hint("name files of the repository by their path from its root, such as go.sum or web/package-lock.json")
		}
	}
	return l.validateRepoCaches(where, seen)
}

// validateCaches checks the user's caches' targets and returns them,
// cleaned.
func (l *Loaded) validateCaches(where string) (map[string]bool, error) {
	seen := map[string]bool{}
	for _, c := range l.Caches {
		t := path.Clean(c.Target)
		switch {
		case !path.IsAbs(c.Target):
			return nil, usererr.New("%s: cache target %q must be an absolute path in the container", where, c.Target)
		case t == "/" || t == container.Home || t == container.Workspace || strings.HasPrefix(t, container.Workspace+"/"):
			return nil, usererr.New("%s: cache target %q: a cache cannot be /, the home directory or in /workspace", where, c.Target).
				Hint("name the cache's own directory, such as %s/go/pkg/mod", container.Home)
		case strings.ContainsAny(t, ",\x00\n"):
			return nil, usererr.New("%s: cache target %q: commas and control characters are not supported", where, c.Target)
		case seen[t]:
			return nil, usererr.New("%s: cache target %q is listed twice", where, c.Target)
		}
		seen[t] = true
	}
	return seen, nil
}

// validateRepoCaches checks the repository's caches: each well formed,
// named once, and on a target no other cache has (seen holds the user's
// caches' targets; the repository's are added).
func (l *Loaded) validateRepoCaches(where string, seen map[string]bool) error {
	names := map[string]bool{}
	for _, c := range l.RepoCaches {
		if err := CheckRepoCache(c); err != nil {
			return usererr.New("%s: repo_cache: %v", where, err).
				Hint("a repository's cache looks like: [[repo_cache]] name = \"gomod\" target = \"%s/go/pkg/mod\"", container.Home)
		}
		if names[c.Name] {
			return usererr.New("%s: repo_cache %q is listed twice", where, c.Name)
		}
		names[c.Name] = true
		t := path.Clean(c.Target)
		if seen[t] {
			return usererr.New("%s: repo_cache %q: target %s is also another cache's", where, c.Name, t)
		}
		seen[t] = true
	}
	return nil
}

// maxSetupInputs bounds setup_inputs.
const maxSetupInputs = 64

// CheckSetupInput checks one setup_inputs entry: a path from the
// repository's root, without "..", globs or control characters.
func CheckSetupInput(p string) error {
	switch {
	case p == "" || path.IsAbs(p) || p != path.Clean(p) || p == "." || p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%q is not a clean path from the repository's root", p)
	case strings.ContainsAny(p, "*?[\\:") || strings.IndexFunc(p, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("%q: globs, backslashes, colons and control characters are not supported", p)
	}
	return nil
}

// repoCacheName is what a repository's cache may be called.
var repoCacheName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,39}$`)

// loginDirs are the entries of the agent's home that hold an agent's
// login or settings (the first part of every adapter's login paths): no
// repository cache may cover, hide or sit inside them.
var loginDirs = []string{".claude", ".claude.json", ".codex"}

// CheckRepoCache checks a cache a repository names: a short name, and an
// absolute target that is not /, the home, a login path, /workspace or
// the kernel's file systems.
func CheckRepoCache(c RepoCache) error {
	if !repoCacheName.MatchString(c.Name) {
		return fmt.Errorf("name %q: use 1 to 40 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", c.Name)
	}
	t := path.Clean(c.Target)
	under := func(dir string) bool { return t == dir || strings.HasPrefix(t, dir+"/") }
	switch {
	case !path.IsAbs(c.Target):
		return fmt.Errorf("%q: target %q must be an absolute path in the container", c.Name, c.Target)
	case strings.ContainsAny(t, ",\x00\n") || strings.IndexFunc(t, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("%q: target %q: commas and control characters are not supported", c.Name, c.Target)
	case t == "/" || t == path.Dir(container.Home) || t == container.Home || under(container.Workspace):
		return fmt.Errorf("%q: target %q: a cache cannot be /, the home directory or in /workspace", c.Name, c.Target)
	case under("/proc") || under("/sys") || under("/dev"):
		return fmt.Errorf("%q: target %q is a kernel file system", c.Name, c.Target)
	}
	for _, d := range loginDirs {
		if under(container.Home + "/" + d) {
			return fmt.Errorf("%q: target %q would hold an agent's login or settings (%s/%s)", c.Name, c.Target, container.Home, d)
		}
	}
	return nil
}

// checkSecrets checks every [[secret]]: a variable name used once, hosts
// that are names, and exactly one source.
func checkSecrets(where string, secrets []Secret) error {
	seen := map[string]bool{}
	for i, s := range secrets {
		what := fmt.Sprintf("%s: secret %q", where, s.Name)
		if s.Name == "" {
			what = fmt.Sprintf("%s: secret #%d", where, i+1)
		}
		if !ValidEnvName(s.Name) {
			return usererr.New("%s: name must be an environment variable name (letters, digits, _; not starting with a digit)", what).
				Hint("[[secret]] name = \"ANTHROPIC_API_KEY\", hosts = [\"api.anthropic.com\"], from_env = \"ANTHROPIC_API_KEY\"")
		}
		if reservedSecretName(s.Name) {
			return usererr.New("%s: git sandbox sets %s in the container itself", what, s.Name).
				Hint("name the variable the agent's tool reads its key from, such as ANTHROPIC_API_KEY or GH_TOKEN")
		}
		if seen[s.Name] {
			return usererr.New("%s is listed twice", what)
		}
		seen[s.Name] = true
		if len(s.Hosts) == 0 {
			return usererr.New("%s: no hosts", what).Hint("name the hosts the secret may be sent to: hosts = [\"api.example.com\"]")
		}
		for _, h := range s.Hosts {
			e, err := egress.ParseEntry(h, egress.SecretSource(s.Name))
			if err != nil {
				return usererr.Wrap(err, "%s: hosts: %v", what, err).Hint("entries look like api.example.com, *.example.com or example.com:8443")
			}
			if e.Addr.IsValid() {
				return usererr.New("%s: host %s is an address", what, h).
					Hint("a secret is bound to host names: the proxy checks the server's certificate for that name")
			}
		}
		n := 0
		for _, v := range []string{s.FromEnv, s.FromFile, s.FromCommand} {
			if v != "" {
				n++
			}
		}
		if n != 1 {
			return usererr.New("%s: give exactly one of from_env, from_file and from_command", what)
		}
		if s.FromEnv != "" && !ValidEnvName(s.FromEnv) {
			return usererr.New("%s: from_env %q is not a variable name", what, s.FromEnv)
		}
		if s.FromFile != "" && !filepath.IsAbs(s.FromFile) {
			return usererr.New("%s: from_file %q must be an absolute path", what, s.FromFile)
		}
	}
	return nil
}

// reservedSecretName reports whether name is a variable git sandbox sets
// in the agent's container (home, proxy, trust bundle, its own).
func reservedSecretName(name string) bool {
	switch strings.ToUpper(name) {
	case "HOME", "USER", "LOGNAME", "PATH", "TERM", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
		"SSL_CERT_FILE", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS":
		return true
	}
	return strings.HasPrefix(strings.ToUpper(name), "GIT_SANDBOX")
}

// ValidEnvName reports whether s is a portable environment variable name.
func ValidEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Accepted ranges of the numeric and duration settings.
const (
	// MinCPUs is the smallest CPU limit (the daemon's own minimum);
	// MaxCPUs the largest.
	MinCPUs = 0.01
	MaxCPUs = 1024
	// MinPids and MaxPids bound the process limit: fewer than MinPids
	// processes cannot run an agent's shell and its tools; MaxPids is the
	// kernel's largest pid_max.
	MinPids, MaxPids = 16, 4194304
	// MinMemory is the smallest memory limit the daemon accepts.
	MinMemory = 6 << 20
	// MinInterval is the shortest snapshot interval in the user's config;
	// MinRepoInterval the shortest a repository may ask for, so a
	// repository cannot make the host snapshot without pause; MaxInterval
	// the longest.
	MinInterval     = time.Second
	MinRepoInterval = 10 * time.Second
	MaxInterval     = 24 * time.Hour
)

// rangeError is a setting outside its accepted range. where is a file
// (then key is a key in it) or "" for a command-line flag (then key is
// the flag).
func rangeError(where, key, value, want string) error {
	if where == "" {
		return usererr.New("%s %s: %s", key, value, want).Hint("see git sandbox start --help")
	}
	return usererr.New("%s: %s = %s: %s", where, key, value, want).
		Hint("fix the file; every key is described in .sandbox.toml.example")
}

// CheckCPUs checks a CPU limit: from MinCPUs to MaxCPUs. (A config file
// may be shared between machines, so the limit is not held to this one's
// CPUs; the daemon says so at start.)
func CheckCPUs(where, key string, v float64) error {
	if !(v >= MinCPUs && v <= MaxCPUs) {
		return rangeError(where, key, strconv.FormatFloat(v, 'g', -1, 64), fmt.Sprintf("must be a number of CPUs from %g to %d", MinCPUs, MaxCPUs))
	}
	return nil
}

// CheckPids checks a process limit: from MinPids to MaxPids.
func CheckPids(where, key string, v int64) error {
	if v < MinPids || v > MaxPids {
		return rangeError(where, key, strconv.FormatInt(v, 10), fmt.Sprintf("must be a number of processes from %d to %d", MinPids, MaxPids))
	}
	return nil
}

// CheckMemory checks a memory size: "0" (no limit) or at least MinMemory.
func CheckMemory(where, key, v string) error {
	n, err := MemoryBytes(v)
	if err != nil || (n != 0 && n < MinMemory) || n < 0 || (n == 0 && v != "0") {
		return rangeError(where, key, strconv.Quote(v), "must be a size of at least 6m (such as 512m or 8g), or \"0\" for no limit")
	}
	return nil
}

// CheckInterval checks a snapshot interval: from MinInterval (a
// repository's: MinRepoInterval) to MaxInterval.
func CheckInterval(where, key string, d time.Duration, repo bool) error {
	lo := MinInterval
	if repo {
		lo = MinRepoInterval
	}
	if d < lo || d > MaxInterval {
		return rangeError(where, key, strconv.Quote(shortDuration(d)), fmt.Sprintf("must be a duration from %s to %s", shortDuration(lo), shortDuration(MaxInterval)))
	}
	return nil
}

// checkImage checks an image name: not empty, no spaces or control
// characters.
func checkImage(where, key, v string) error {
	if v == "" || strings.IndexFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return rangeError(where, key, strconv.Quote(v), "must name an image (such as debian:bookworm), without spaces")
	}
	return nil
}

// checkValues checks every numeric, duration and name setting a file
// defines, naming the key and the accepted range.
func checkValues(path string, c *Config, md toml.MetaData, repo bool) error {
	checks := []struct {
		key   []string
		check func() error
	}{
		{[]string{"limits", "cpus"}, func() error { return CheckCPUs(path, "limits.cpus", c.Limits.CPUs) }},
		{[]string{"limits", "pids"}, func() error { return CheckPids(path, "limits.pids", c.Limits.Pids) }},
		{[]string{"limits", "memory"}, func() error { return CheckMemory(path, "limits.memory", c.Limits.Memory) }},
		{[]string{"rescue", "interval"}, func() error { return CheckInterval(path, "rescue.interval", c.Rescue.Interval.Duration, repo) }},
		{[]string{"rescue", "max_file_size"}, func() error { return CheckFileSize(path, "rescue.max_file_size", c.Rescue.MaxFileSize) }},
		{[]string{"image"}, func() error { return checkImage(path, "image", c.Image) }},
		{[]string{"network_prompt_timeout"}, func() error { return CheckPromptTimeout(path, c.NetworkPromptTimeout.Duration) }},
		{[]string{"base_image"}, func() error { return checkImage(path, "base_image", c.BaseImage) }},
	}
	for _, ch := range checks {
		if md.IsDefined(ch.key...) {
			if err := ch.check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// DefaultPromptTimeout is how long a held connection waits for an answer
// when network_prompt_timeout is not set.
const DefaultPromptTimeout = 30 * time.Second

// CheckPromptTimeout refuses a network_prompt_timeout outside 1s to 10m:
// an agent's client gives up on a connection that waits longer.
func CheckPromptTimeout(path string, d time.Duration) error {
	if d < time.Second || d > 10*time.Minute {
		return usererr.New("%s: network_prompt_timeout %s is outside 1s to 10m", path, d).
			Hint("the default is %s; a held connection is refused when it passes", shortDuration(DefaultPromptTimeout))
	}
	return nil
}

// PromptTimeout is how long a held connection waits: the user's
// network_prompt_timeout, or the default.
func (c *Config) PromptTimeout() time.Duration {
	if c.NetworkPromptTimeout.Duration > 0 {
		return c.NetworkPromptTimeout.Duration
	}
	return DefaultPromptTimeout
}

// shortDuration writes 24h, 2m or 10s rather than 24h0m0s.
func shortDuration(d time.Duration) string {
	switch {
	case d != 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d != 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// MinFileSize is the smallest rescue.max_file_size.
const MinFileSize = 1 << 10

// FileSizeBytes parses rescue.max_file_size ("50m", "1g"; "0" is no limit).
func FileSizeBytes(s string) (int64, error) { return MemoryBytes(s) }

// CheckFileSize checks rescue.max_file_size: "0" (no limit) or at least
// MinFileSize.
func CheckFileSize(where, key, v string) error {
	n, err := FileSizeBytes(v)
	if err != nil || n < 0 || (n != 0 && n < MinFileSize) || (n == 0 && v != "0") {
		return rangeError(where, key, strconv.Quote(v), "must be a size of at least 1k (such as 50m or 1g), or \"0\" to take every file")
	}
	return nil
}
