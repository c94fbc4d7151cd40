// Package devcontainer reads a repository's devcontainer.json and builds the
// sandbox image it describes: the project's own image (named, or built from
// its Dockerfile) as the base, git sandbox's layer on top.
//
// The file is repository configuration, so it is untrusted. It is read from
// a committed tree — the commit the sandbox starts from — through git, never
// from a worktree: the sandbox worktree is the agent's to write, and reading
// the user's checkout would make the image depend on uncommitted edits that
// no hash or review covers. Paths it names (Dockerfile, build context) are
// resolved inside that tree, symbolic links included, and refused when they
// lead out of it. What the file may choose is what the repository could
// already choose for code running inside the container: the image, the
// setup commands, environment variables that are not credentials. Anything
// that reaches the host — mounts, docker run arguments, privileges,
// capabilities, published ports beyond loopback, commands run on the host,
// the container user — is ignored, each with a one-line reason.
//
// How start uses it (internal/sandbox, plan.go): when neither --image nor the user's config
// nor .sandbox.toml picks an image, Load the devcontainer of the base commit;
// if there is one with a base, print every Ignored entry, pass
// ImageChoices through the user's image policy (config.Loaded.RefusedImages)
// before anything is built, PlanImage and EnsureImage (which builds only when
// no image has the planned tag, on the sandbox's network; the agent CLIs are
// tried only when the sandbox's agent needs one), then
// run the sandbox on Image.Tag with Config.SetupCommand() as setup (unless
// the repository's .sandbox.toml sets one) and Config.Environ(Image.Env)
// before the agent's and the user's variables (theirs win). A devcontainer
// is used as a whole or not at all: when the image comes from elsewhere, its
// setup and environment are not applied either.
package devcontainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Candidates are where a devcontainer.json is looked for, in order; the
// first present wins.
var Candidates = []string{".devcontainer/devcontainer.json", ".devcontainer.json"}

// Config is what git sandbox takes from a devcontainer.json.
type Config struct {
	// Path is where the file was found, relative to the repository root.
	Path string `json:"path"`
	// Image is the base image's reference, when the file names one (and
	// builds none); ImageLine is the line of the file that names it.
	Image     string `json:"image,omitempty"`
	ImageLine int    `json:"image_line,omitempty"`
	// Build is set when the base is built from the repository's Dockerfile.
	Build *Build `json:"build,omitempty"`
	// Setup holds the creation commands (onCreateCommand,
	// updateContentCommand, postCreateCommand), in the order they run.
	Setup []Step `json:"setup,omitempty"`
	// Env holds containerEnv, then remoteEnv, as written (see Environ).
	Env []EnvVar `json:"env,omitempty"`
	// Ports are container ports (forwardPorts) to publish on the host's
	// loopback interface only.
	Ports []int `json:"ports,omitempty"`
	// Ignored lists what the file asks for that git sandbox does not do.
	Ignored []Ignored `json:"ignored,omitempty"`
}

// Build is a base image built from the repository's Dockerfile.
type Build struct {
	// Dockerfile and Context are paths in the repository, with symbolic
	// links resolved ("." is the root).
	Dockerfile string            `json:"dockerfile"`
	Context    string            `json:"context"`
	Args       map[string]string `json:"args,omitempty"`
	Target     string            `json:"target,omitempty"`
	// DockerfileBlob and ContextTree are the git objects they name in the
	// commit the file was read from.
	DockerfileBlob string `json:"dockerfile_blob"`
	ContextTree    string `json:"context_tree"`

	// As written in the file, relative to its directory.
	rawDockerfile, rawContext string
}

// Step is one setup command, in POSIX shell syntax.
type Step struct {
	// Name is the key it came from: postCreateCommand, or
	// postCreateCommand.NAME for one of an object's commands.
	Name    string `json:"name"`
	Command string `json:"command"`
}

// EnvVar is one variable of containerEnv or remoteEnv.
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// From is containerEnv or remoteEnv.
	From string `json:"from"`
}

// Ignored is one thing the file asks for that git sandbox does not do.
type Ignored struct {
	// Key names it: runArgs, build.options, containerEnv.GITHUB_TOKEN.
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// String is the message for the user, one line, escaped.
func (i Ignored) String() string {
	return termsafe.String(i.Key) + " ignored: " + i.Reason
}

// HasBase reports whether the file says what to build on (image or build).
// Without one the devcontainer is not used.
func (c *Config) HasBase() bool { return c.Image != "" || c.Build != nil }

// SetupCommand is the setup steps as one command for /bin/sh -c: a single
// step as written, several in a shell with -e, each in its own subshell, so
// the first failure stops setup.
func (c *Config) SetupCommand() string {
	switch len(c.Setup) {
	case 0:
		return ""
	case 1:
		return c.Setup[0].Command
	}
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, s := range c.Setup {
		fmt.Fprintf(&b, "# %s\n(\n%s\n)\n", oneLine(s.Name), s.Command)
	}
	return b.String()
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

// Source is the committed tree a devcontainer is read from.
type Source struct {
	// Git runs git in the user's repository, whose object store holds Commit.
	Git *gitcmd.Runner
	// Commit is the commit the sandbox starts from.
	Commit string
}

// Load reads the devcontainer of src's commit. It returns nil, nil when the
// commit has none. A file that cannot be used as written (not JSON, a path
// out of the repository, a build without a Dockerfile) is an error naming
// the file.
func Load(ctx context.Context, src Source) (*Config, error) {
	t, err := openTree(ctx, src.Git, src.Commit)
	if err != nil {
		return nil, err
	}
	for _, cand := range Candidates {
		_, e, err := t.resolve(ctx, cand)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotDir), errors.Is(err, errGitlink):
			// A .devcontainer submodule is not in this commit's tree, and
			// not in a sandbox's worktree either.
			continue
		case err != nil:
			return nil, fileError(cand, "", err)
		}
		if e.Type != "blob" {
			continue
		}
		data, err := t.blob(ctx, e.ID, maxFileSize)
		if err != nil {
			return nil, usererr.Wrap(err, "%s: %v", cand, err)
		}
		c, err := parse(cand, data)
		if err != nil {
			return nil, err
		}
		if c.Build != nil {
			if err := c.resolveBuild(ctx, t); err != nil {
				return nil, err
			}
		}
		return c, nil
	}
	return nil, nil
}

// resolveBuild finds the Dockerfile and the context in the tree.
func (c *Config) resolveBuild(ctx context.Context, t *tree) error {
	dir := path.Dir(c.Path)
	b := c.Build
	p, e, err := t.resolve(ctx, joinRaw(dir, b.rawContext))
	if err != nil {
		return fileError(c.Path, "build.context "+strconv.Quote(b.rawContext), err)
	}
	if e.Type != "tree" {
		return usererr.New("%s: build.context %s is not a directory", c.Path, termsafe.String(strconv.Quote(b.rawContext))).
			Hint("point it at a directory of the repository, or pick an image with --image")
	}
	b.Context, b.ContextTree = p, e.ID
	p, e, err = t.resolve(ctx, joinRaw(dir, b.rawDockerfile))
	if err != nil {
		return fileError(c.Path, "build.dockerfile "+strconv.Quote(b.rawDockerfile), err)
	}
	if e.Type != "blob" || e.Mode == modeGitlink {
		return usererr.New("%s: build.dockerfile %s is not a file", c.Path, termsafe.String(strconv.Quote(b.rawDockerfile))).
			Hint("point it at the Dockerfile, or pick an image with --image")
	}
	b.Dockerfile, b.DockerfileBlob = p, e.ID
	return nil
}

// joinRaw joins without cleaning: ".." is resolved by the tree walk after
// the links before it, as a filesystem would.
func joinRaw(dir, rel string) string {
	if path.IsAbs(rel) {
		return rel
	}
	return dir + "/" + rel
}

// fileError words a failure to resolve what the file names.
func fileError(file, what string, err error) error {
	subject := file
	if what != "" {
		subject = file + ": " + termsafe.String(what)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usererr.Wrap(err, "%s is not in the repository at this commit", subject).
			Hint("commit the file it names, or pick an image with --image")
	case errors.Is(err, errEscapes), errors.Is(err, errAbsolute):
		return usererr.Wrap(err, "%s %v: paths must stay inside the repository", subject, err).
			Hint("name a path inside the repository, or pick an image with --image")
	case errors.Is(err, errLoop), errors.Is(err, errNotDir), errors.Is(err, errGitlink):
		return usererr.Wrap(err, "%s %v", subject, err).
			Hint("fix the path, or pick an image with --image")
	}
	return fmt.Errorf("%s: %w", subject, err)
}

// Why each key is not followed. Keys not listed here and not honoured are
// "not understood".
var ignoredKeys = map[string]string{
	"mounts":            "mounts come only from your own config ([[mount]] in ~/.config/git-sandbox/config.toml)",
	"runArgs":           "docker run arguments from a repository could undo the sandbox's hardening",
	"privileged":        "a sandbox is never privileged",
	"capAdd":            "a sandbox runs with every capability dropped",
	"securityOpt":       "a sandbox's security options are fixed (no-new-privileges)",
	"init":              "a sandbox always runs an init process",
	"initializeCommand": "it would run on your machine, outside any container; git sandbox never runs repository commands on the host",
	"postStartCommand":  "it runs on every container start; git sandbox runs setup once, when the sandbox is made",
	"postAttachCommand": "it runs when an editor attaches; nothing attaches to a sandbox",
	"remoteUser":        "a sandbox runs as your uid:gid, so the files in its worktree stay yours",
	"containerUser":     "a sandbox runs as your uid:gid, so the files in its worktree stay yours",
	"workspaceMount":    "the worktree is always mounted at /workspace, and nothing else of the host",
	"workspaceFolder":   "the worktree is always at /workspace",
	"appPort":           "it publishes ports on every interface of your machine; forwardPorts (loopback only) is honoured",
	"hostRequirements":  "not checked; a sandbox's limits come from your config and flags",
	"features":          "features are fetched from registries and installed as root at build time; put what they install into the Dockerfile",
	"dockerComposeFile": "Docker Compose configurations are not supported",
	"service":           "Docker Compose configurations are not supported",
	"runServices":       "Docker Compose configurations are not supported",
}

// editorOnly keys only steer an editor or its devcontainer tooling; they
// have nothing to do in a sandbox and are passed over silently.
var editorOnly = map[string]bool{
	"$schema": true, "name": true, "customizations": true, "portsAttributes": true,
	"otherPortsAttributes": true, "shutdownAction": true, "waitFor": true,
	"userEnvProbe": true, "updateRemoteUserUID": true, "overrideCommand": true,
}

// setupKeys are the creation commands, in the order they run.
var setupKeys = []string{"onCreateCommand", "updateContentCommand", "postCreateCommand"}

// parse reads a devcontainer.json (JSON with comments and trailing commas)
// into a Config whose build paths are not resolved yet.
func parse(file string, data []byte) (*Config, error) {
	std, err := standardize(data)
	if err == nil {
		err = json.Unmarshal(std, new(any))
	}
	if err != nil {
		return nil, usererr.Wrap(err, "%s: not valid JSON: %v", file, decodeError(data, err)).
			Hint("fix the file (comments and trailing commas are fine), or pick an image with --image")
	}
	ms, ok, err := members(std)
	if err != nil || !ok {
		return nil, usererr.New("%s: not a JSON object", file).
			Hint("fix the file, or pick an image with --image")
	}
	ps := &parsing{c: &Config{Path: file}, std: std, setup: map[string]json.RawMessage{}}
	for i := range ms {
		if err := ps.member(&ms[i]); err != nil {
			return nil, err
		}
	}
	ps.setupSteps()
	if err := ps.pickBuild(); err != nil {
		return nil, err
	}
	return ps.c, nil
}

// parsing is one devcontainer.json being read: the members seen so far
// that are only understood together.
type parsing struct {
	c     *Config
	std   []byte
	setup map[string]json.RawMessage
	// build, topDockerfile and topContext are the two spellings of what
	// to build.
	build, topDockerfile, topContext *member
}

func (ps *parsing) ignore(key, reason string) {
	ps.c.Ignored = append(ps.c.Ignored, Ignored{Key: key, Reason: reason})
}

func (ps *parsing) invalid(key, format string, args ...any) error {
	return usererr.New("%s: %s %s", ps.c.Path, termsafe.String(key), fmt.Sprintf(format, args...)).
		Hint("fix the file, or pick an image with --image")
}

// member reads one top-level member.
func (ps *parsing) member(m *member) error {
	c := ps.c
	switch m.Key {
	case "image":
		s, ok := jsonString(m.Value)
		if !ok || strings.TrimSpace(s) == "" {
			return ps.invalid("image", "must be an image reference")
		}
		if strings.Contains(s, "${") {
			return ps.invalid("image", "uses a ${…} variable, which git sandbox does not expand")
		}
		c.Image = s
		c.ImageLine, _ = position(ps.std, m.Offset)
	case "build":
		ps.build = m
	case "dockerFile":
		ps.topDockerfile = m
	case "context":
		ps.topContext = m
	case "onCreateCommand", "updateContentCommand", "postCreateCommand":
		ps.setup[m.Key] = m.Value
	case "containerEnv", "remoteEnv":
		vars, ign := parseEnv(m.Key, m.Value)
		c.Env = append(c.Env, vars...)
		c.Ignored = append(c.Ignored, ign...)
	case "forwardPorts":
		ports, ign := parsePorts(m.Value)
		c.Ports = append(c.Ports, ports...)
		c.Ignored = append(c.Ignored, ign...)
	case "features":
		ps.features(m.Value)
	default:
		switch reason, listed := ignoredKeys[m.Key]; {
		case editorOnly[m.Key]:
		case listed:
			ps.ignore(m.Key, reason)
		default:
			ps.ignore(m.Key, "not understood by git sandbox")
		}
	}
	return nil
}

// features are passed over, each by name.
func (ps *parsing) features(raw json.RawMessage) {
	fs, ok, _ := members(raw)
	if !ok {
		ps.ignore("features", ignoredKeys["features"])
	}
	for _, f := range fs {
		ps.ignore("features."+f.Key, ignoredKeys["features"])
	}
}

// setupSteps are the creation commands, in the order they run.
func (ps *parsing) setupSteps() {
	for _, k := range setupKeys {
		if raw, ok := ps.setup[k]; ok {
			steps, ign := parseCommand(k, raw)
			ps.c.Setup = append(ps.c.Setup, steps...)
			ps.c.Ignored = append(ps.c.Ignored, ign...)
		}
	}
}

// pickBuild is what the file builds: build, or the older top-level
// dockerFile and context; a built image is used over image.
func (ps *parsing) pickBuild() error {
	c := ps.c
	switch {
	case ps.build != nil:
		b, ign, err := parseBuild(c.Path, ps.build.Value)
		if err != nil {
			return err
		}
		c.Build = b
		c.Ignored = append(c.Ignored, ign...)
		if ps.topDockerfile != nil {
			ps.ignore("dockerFile", "build.dockerfile is used")
		}
		if ps.topContext != nil {
			ps.ignore("context", "build.context is used")
		}
	case ps.topDockerfile != nil:
		b, err := ps.topLevelBuild()
		if err != nil {
			return err
		}
		c.Build = b
	case ps.topContext != nil:
		ps.ignore("context", "there is no Dockerfile to build it with")
	}
	if c.Build == nil {
		return nil
	}
	if err := checkBuildPaths(c.Path, c.Build); err != nil {
		return err
	}
	if c.Image != "" {
		ps.ignore("image", "the file also builds an image (build), which is used")
		c.Image = ""
	}
	return nil
}

// topLevelBuild is the older spelling: dockerFile and context at the top
// level.
func (ps *parsing) topLevelBuild() (*Build, error) {
	df, ok := jsonString(ps.topDockerfile.Value)
	if !ok || df == "" {
		return nil, ps.invalid("dockerFile", "must be a path")
	}
	b := &Build{rawDockerfile: df, rawContext: "."}
	if ps.topContext != nil {
		cx, ok := jsonString(ps.topContext.Value)
		if !ok {
			return nil, ps.invalid("context", "must be a path")
		}
		b.rawContext = cx
	}
	return b, nil
}

func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// parseBuild reads the build object.
func parseBuild(file string, raw json.RawMessage) (*Build, []Ignored, error) {
	invalid := func(key, what string) error {
		return usererr.New("%s: build.%s %s", file, termsafe.String(key), what).
			Hint("fix the file, or pick an image with --image")
	}
	ms, ok, err := members(raw)
	if err != nil || !ok {
		return nil, nil, usererr.New("%s: build must be an object", file).
			Hint("fix the file, or pick an image with --image")
	}
	b := &Build{rawContext: "."}
	var ign []Ignored
	for _, m := range ms {
		switch m.Key {
		case "dockerfile", "dockerFile":
			s, ok := jsonString(m.Value)
			if !ok || s == "" {
				return nil, nil, invalid(m.Key, "must be a path")
			}
			b.rawDockerfile = s
		case "context":
			s, ok := jsonString(m.Value)
			if !ok {
				return nil, nil, invalid(m.Key, "must be a path")
			}
			if s != "" {
				b.rawContext = s
			}
		case "target":
			s, ok := jsonString(m.Value)
			if !ok {
				return nil, nil, invalid(m.Key, "must be a string")
			}
			if strings.Contains(s, "${") {
				return nil, nil, invalid(m.Key, "uses a ${…} variable, which git sandbox does not expand")
			}
			b.Target = s
		case "args":
			args, ok, err := members(m.Value)
			if err != nil || !ok {
				return nil, nil, invalid(m.Key, "must be an object of strings")
			}
			for _, a := range args {
				key := "build.args." + a.Key
				v, ok := jsonString(a.Value)
				switch {
				case !ok:
					ign = append(ign, Ignored{key, "not a string"})
				case a.Key == "" || strings.ContainsAny(a.Key, "= \t\n\x00"):
					ign = append(ign, Ignored{key, "not a valid argument name"})
				default:
					if reason := variableReason(v, false); reason != "" {
						ign = append(ign, Ignored{key, reason})
						continue
					}
					if b.Args == nil {
						b.Args = map[string]string{}
					}
					b.Args[a.Key] = expandWorkspace(v)
				}
			}
		case "cacheFrom":
			ign = append(ign, Ignored{"build.cacheFrom", "cache images would be pulled from a registry; the local build cache is used"})
		case "options":
			ign = append(ign, Ignored{"build.options", "docker build options from a repository are not passed on"})
		default:
			ign = append(ign, Ignored{"build." + m.Key, "not understood by git sandbox"})
		}
	}
	if b.rawDockerfile == "" {
		return nil, nil, usererr.New("%s: build names no dockerfile", file).
			Hint("add \"dockerfile\" to build, or pick an image with --image")
	}
	return b, ign, nil
}

// checkBuildPaths refuses paths that cannot stay in the repository before
// anything is read: absolute paths and variables.
func checkBuildPaths(file string, b *Build) error {
	for _, p := range []struct{ key, val string }{{"build.dockerfile", b.rawDockerfile}, {"build.context", b.rawContext}} {
		if path.IsAbs(p.val) {
			return fileError(file, p.key+" "+strconv.Quote(p.val), errAbsolute)
		}
		if strings.Contains(p.val, "${") {
			return usererr.New("%s: %s %s uses a ${…} variable, which git sandbox does not expand", file, p.key, termsafe.String(strconv.Quote(p.val))).
				Hint("name a path inside the repository, or pick an image with --image")
		}
	}
	return nil
}

// parseCommand turns a lifecycle command into setup steps. A string is a
// shell command; an array is an argv, run as written (each word quoted for
// the shell); an object holds named commands of either form, run one after
// the other in the file's order (the specification runs them in parallel;
// in order is deterministic and gives the same result for commands that
// do not depend on each other).
func parseCommand(key string, raw json.RawMessage) ([]Step, []Ignored) {
	if cmd, ok, empty := commandOf(raw); ok {
		if empty {
			return nil, nil
		}
		return []Step{{Name: key, Command: cmd}}, nil
	}
	ms, ok, err := members(raw)
	if err != nil || !ok {
		return nil, []Ignored{{key, "not a string, an array of strings or an object of commands"}}
	}
	var steps []Step
	var ign []Ignored
	for _, m := range ms {
		name := key + "." + m.Key
		cmd, ok, empty := commandOf(m.Value)
		switch {
		case !ok:
			ign = append(ign, Ignored{name, "not a string or an array of strings"})
		case !empty:
			steps = append(steps, Step{Name: name, Command: cmd})
		}
	}
	return steps, ign
}

// commandOf reads a string or argv command; ok is false for anything else.
func commandOf(raw json.RawMessage) (cmd string, ok, empty bool) {
	if string(raw) == "null" {
		return "", true, true
	}
	if s, isString := jsonString(raw); isString {
		return s, true, strings.TrimSpace(s) == ""
	}
	var argv []string
	if err := json.Unmarshal(raw, &argv); err != nil {
		return "", false, false
	}
	if len(argv) == 0 {
		return "", true, true
	}
	return shellJoin(argv), true, false
}

var shellPlain = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin quotes each word so /bin/sh -c runs exactly argv.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if shellPlain.MatchString(a) {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// secretWords in a variable's name mark it as a credential.
var secretWords = []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "CREDENTIAL"}

// parseEnv reads containerEnv or remoteEnv.
func parseEnv(from string, raw json.RawMessage) ([]EnvVar, []Ignored) {
	ms, ok, err := members(raw)
	if err != nil || !ok {
		return nil, []Ignored{{from, "not an object of strings"}}
	}
	var vars []EnvVar
	var ign []Ignored
	for _, m := range ms {
		key := from + "." + m.Key
		v, isString := jsonString(m.Value)
		if reason := envNameReason(m.Key); reason != "" {
			ign = append(ign, Ignored{key, reason})
			continue
		}
		if !isString {
			ign = append(ign, Ignored{key, "not a string"})
			continue
		}
		if reason := variableReason(v, true); reason != "" {
			ign = append(ign, Ignored{key, reason})
			continue
		}
		vars = append(vars, EnvVar{Name: m.Key, Value: v, From: from})
	}
	return vars, ign
}

// envNameReason says why a variable name is not taken, or "".
func envNameReason(name string) string {
	if name == "" || strings.ContainsAny(name, "= \t\r\n\x00") {
		return "not a valid variable name"
	}
	up := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return "its name says it holds a credential; only you pass those (-e, or env in your config)"
		}
	}
	switch {
	case up == "HOME" || up == "USER" || up == "LOGNAME" || up == "TERM" || strings.HasPrefix(up, "GIT_SANDBOX"):
		return "set by git sandbox"
	case strings.HasPrefix(up, "GIT_"):
		return "git's own variables would redirect the agent's repository"
	}
	return ""
}

// variableRef matches ${name} and ${name:arg…}.
var variableRef = regexp.MustCompile(`\$\{([^}:]*)(?::([^}]*))?\}`)

// variableReason says why a value with ${…} variables is not taken, or "".
// The workspace variables are expanded; ${containerEnv:…} is, in
// environment values, from the image's environment (Environ); ${localEnv:…}
// never is: it would copy a variable of your machine — a credential, as
// likely as not — into the sandbox.
func variableReason(v string, env bool) string {
	for _, m := range variableRef.FindAllStringSubmatch(v, -1) {
		switch m[1] {
		case "containerWorkspaceFolder", "containerWorkspaceFolderBasename":
		case "containerEnv":
			if !env {
				return "${containerEnv:…} is known only in the container, not at build time"
			}
		case "localEnv", "env":
			return "${localEnv:…} is never expanded: it would copy a variable of your machine into the sandbox"
		case "localWorkspaceFolder", "localWorkspaceFolderBasename":
			return "${" + m[1] + "} would reveal where the repository is on your machine"
		default:
			return "${" + termsafe.String(m[1]) + "} is not expanded by git sandbox"
		}
	}
	return ""
}

// expandWorkspace expands the workspace variables.
func expandWorkspace(v string) string {
	return strings.NewReplacer(
		"${containerWorkspaceFolder}", container.Workspace,
		"${containerWorkspaceFolderBasename}", path.Base(container.Workspace),
	).Replace(v)
}

// Environ returns the variables to set in the sandbox, KEY=VALUE: the
// containerEnv ones, then the remoteEnv ones (which win over a containerEnv
// variable of the same name). ${containerEnv:NAME} and
// ${containerEnv:NAME:default} take NAME from the containerEnv variables
// before them, else from imageEnv (the sandbox image's environment), else
// the default or "".
func (c *Config) Environ(imageEnv []string) []string {
	known := map[string]string{}
	for _, kv := range imageEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			known[k] = v
		}
	}
	var order []string
	val := map[string]string{}
	for _, from := range []string{"containerEnv", "remoteEnv"} {
		for _, e := range c.Env {
			if e.From != from {
				continue
			}
			v := variableRef.ReplaceAllStringFunc(expandWorkspace(e.Value), func(ref string) string {
				m := variableRef.FindStringSubmatch(ref)
				if m[1] != "containerEnv" {
					return ref
				}
				name, def, _ := strings.Cut(m[2], ":")
				if x, ok := known[name]; ok {
					return x
				}
				return def
			})
			if _, seen := val[e.Name]; !seen {
				order = append(order, e.Name)
			}
			val[e.Name] = v
			if from == "containerEnv" {
				known[e.Name] = v
			}
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+val[k])
	}
	return out
}

// parsePorts reads forwardPorts: a port number, or "host:port" where only
// a loopback host means the sandbox itself.
func parsePorts(raw json.RawMessage) ([]int, []Ignored) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, []Ignored{{"forwardPorts", "not an array"}}
	}
	var ports []int
	var ign []Ignored
	for _, it := range items {
		var n int
		if err := json.Unmarshal(it, &n); err == nil {
			if n < 1 || n > 65535 {
				ign = append(ign, Ignored{"forwardPorts." + string(it), "not a port number"})
				continue
			}
			ports = append(ports, n)
			continue
		}
		s, ok := jsonString(it)
		if !ok {
			ign = append(ign, Ignored{"forwardPorts." + string(it), "not a port"})
			continue
		}
		host, port, hasHost := strings.Cut(s, ":")
		if !hasHost {
			host, port = "localhost", s
		}
		n, err := strconv.Atoi(port)
		switch {
		case err != nil || n < 1 || n > 65535:
			ign = append(ign, Ignored{"forwardPorts." + s, "not a port"})
		case host != "localhost" && host != "127.0.0.1":
			ign = append(ign, Ignored{"forwardPorts." + s, "it reaches " + termsafe.String(host) + ", beyond the sandbox; only the sandbox's own ports are published, on loopback"})
		default:
			ports = append(ports, n)
		}
	}
	return ports, ign
}
