package gitcmd

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestEnvironDropsInheritedGitVariables(t *testing.T) {
	t.Setenv("GIT_DIR", "/planted")
	t.Setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor=touch /tmp/x'")
	t.Setenv("GIT_EXTERNAL_DIFF", "evil")
	t.Setenv("GIT_SSH_COMMAND", "evil")
	r := Runner{GitDir: "/repo/.git", WorkTree: "/repo"}
	env := envMap(r.Environ(false))
	if env["GIT_DIR"] != "/repo/.git" || env["GIT_WORK_TREE"] != "/repo" {
		t.Errorf("explicit repository view missing: %v", env)
	}
	for _, k := range []string{"GIT_CONFIG_PARAMETERS", "GIT_EXTERNAL_DIFF", "GIT_SSH_COMMAND"} {
		if _, ok := env[k]; ok {
			t.Errorf("%s leaked into git's environment", k)
		}
	}
	for k, v := range map[string]string{
		"GIT_NO_REPLACE_OBJECTS": "1",
		"GIT_TERMINAL_PROMPT":    "0",
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := env["GIT_OPTIONAL_LOCKS"]; ok {
		t.Error("a write must not disable optional locks")
	}
	if _, ok := env["GIT_CONFIG_GLOBAL"]; ok {
		t.Error("a repository runner must keep the user's configuration")
	}
}

func TestEnvironIsolatedAndReadOnly(t *testing.T) {
	r := Runner{GitDir: "/scratch", WorkTree: "/wt", IndexFile: "/state/index", ObjectDir: "/repo/.git/objects", Isolated: true}
	env := envMap(r.Environ(true))
	want := map[string]string{
		"GIT_CONFIG_NOSYSTEM":  "1",
		"GIT_CONFIG_GLOBAL":    "/dev/null",
		"GIT_ATTR_NOSYSTEM":    "1",
		"GIT_OPTIONAL_LOCKS":   "0",
		"GIT_INDEX_FILE":       "/state/index",
		"GIT_OBJECT_DIRECTORY": "/repo/.git/objects",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestCommandArgv(t *testing.T) {
	r := Runner{GitDir: "/g", Config: []string{"user.name=x"}}
	tests := []struct {
		args    []string
		noExt   bool
		tailArg string
	}{
		{[]string{"diff-tree", "-r", "a", "b"}, true, "b"},
		{[]string{"diff", "--stat", "a", "--", "p"}, true, "p"},
		{[]string{"write-tree"}, false, "write-tree"},
	}
	for _, tt := range tests {
		cmd := r.Command(context.Background(), tt.args...)
		argv := cmd.Args[1:]
		for _, c := range []string{
			"core.hooksPath=/dev/null", "core.fsmonitor=false", "diff.ignoreSubmodules=all",
			"submodule.recurse=false", "user.name=x",
		} {
			i := slices.Index(argv, c)
			if i < 1 || argv[i-1] != "-c" {
				t.Errorf("%v: missing -c %s in %v", tt.args, c, argv)
			}
		}
		sub := slices.Index(argv, tt.args[0])
		if sub < 0 {
			t.Fatalf("%v: subcommand missing from %v", tt.args, argv)
		}
		hasNoExt := slices.Contains(argv, "--no-ext-diff") && slices.Contains(argv, "--no-textconv")
		if hasNoExt != tt.noExt {
			t.Errorf("%v: --no-ext-diff/--no-textconv present = %v, want %v", tt.args, hasNoExt, tt.noExt)
		}
		if hasNoExt && slices.Index(argv, "--no-ext-diff") != sub+1 {
			t.Errorf("%v: --no-ext-diff must follow the subcommand: %v", tt.args, argv)
		}
		if argv[len(argv)-1] != tt.tailArg {
			t.Errorf("%v: argv order changed: %v", tt.args, argv)
		}
	}
}

func TestSplitLines(t *testing.T) {
	if got := SplitLines([]byte("a\x00b c\x00")); !slices.Equal(got, []string{"a", "b c"}) {
		t.Errorf("NUL split = %q", got)
	}
	if got := SplitLines([]byte("a\nb\n")); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("newline split = %q", got)
	}
	if got := SplitLines(nil); got != nil {
		t.Errorf("empty = %q", got)
	}
}
