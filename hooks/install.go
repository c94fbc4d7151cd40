// Package hooks owns git sandbox's pre-push hook: installing it (keeping and
// calling any hook the user had), uninstalling it (restoring theirs exactly),
// and deciding on a push (refs/sandbox/* never leave; a running sandbox's
// branch, or one whose verify failed, waits; with verify_before_push every
// pushed commit is verified in a fresh container first).
//
// The hook lives in the user's hooks directory, which every sandbox mounts
// read-only: an agent can neither change nor remove it.
package hooks

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Marker identifies the hook git sandbox installs.
const Marker = "# git-sandbox pre-push hook"

// Chained is the name the user's own pre-push hook is kept under.
const Chained = "pre-push.git-sandbox-chained"

// script is the installed hook. It calls the user's own hook first (a
// refusal there stops the push), then git sandbox. When git-sandbox is not
// on PATH it refuses, unless the user's config says allow_push_without_binary.
const script = `#!/bin/sh
` + Marker + ` (installed by: git sandbox hooks install)
# Your own pre-push hook, if you had one, is kept next to this file as
# ` + Chained + ` and runs first. Remove this hook with:
#   git sandbox hooks uninstall
dir=$(dirname "$0")
input=$(mktemp "${TMPDIR:-/tmp}/git-sandbox-pre-push.XXXXXX") || exit 1
trap 'rm -f "$input"' EXIT
cat > "$input"
if [ -f "$dir/` + Chained + `" ]; then
	"$dir/` + Chained + `" "$@" < "$input" || exit $?
fi
if command -v git-sandbox >/dev/null 2>&1; then
	git-sandbox hook pre-push "$@" < "$input"
	exit $?
fi
config="${GIT_SANDBOX_CONFIG:-${XDG_CONFIG_HOME:-$HOME/.config}/git-sandbox/config.toml}"
if [ -f "$config" ] && grep -Eq '^[[:space:]]*allow_push_without_binary[[:space:]]*=[[:space:]]*true' "$config"; then
	echo "git sandbox: warning: git-sandbox is not on PATH; pushing without the sandbox checks (allow_push_without_binary)" >&2
	exit 0
fi
echo "git sandbox: error: git-sandbox is not on PATH, so this push cannot be checked" >&2
echo "hint: put git-sandbox on PATH, or set allow_push_without_binary = true under [hooks] in $config" >&2
exit 1
`

// State is what status reports.
type State struct {
	Dir        string
	HooksPath  bool // Dir comes from core.hooksPath
	Installed  bool
	Chained    bool // the user's own hook is kept and called first
	Foreign    bool // a pre-push hook that is not ours is in place
	BinaryPath string
}

// Status inspects the hooks directory.
func Status(dir string, hooksPath bool) State {
	st := State{Dir: dir, HooksPath: hooksPath}
	b, err := os.ReadFile(filepath.Join(dir, "pre-push"))
	if err == nil {
		st.Installed = bytes.Contains(b, []byte(Marker))
		st.Foreign = !st.Installed
	}
	if _, err := os.Lstat(filepath.Join(dir, Chained)); err == nil {
		st.Chained = true
	}
	return st
}

// Install puts the hook in dir. An existing pre-push hook is renamed to
// Chained (so it keeps its content and mode) and called first. Installing
// twice is a no-op. force replaces a left-over chained hook's slot only when
// it is not in use.
func Install(dir string, force bool) (State, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return State{}, fmt.Errorf("install hook: %w", err)
	}
	hook := filepath.Join(dir, "pre-push")
	chained := filepath.Join(dir, Chained)
	st := Status(dir, false)
	if st.Installed {
		return st, nil
	}
	if st.Foreign {
		if st.Chained {
			if !force {
				return st, usererr.New("%s already exists next to your pre-push hook", chained).
					Hint("a previous install was interrupted; move one of them away, or rerun with --force to keep the current pre-push and drop the old %s", Chained)
			}
			if err := os.Remove(chained); err != nil {
				return st, fmt.Errorf("install hook: %w", err)
			}
		}
		if err := os.Rename(hook, chained); err != nil {
			return st, fmt.Errorf("install hook: keep your pre-push hook: %w", err)
		}
	}
	tmp := hook + ".git-sandbox-tmp"
	if err := os.WriteFile(tmp, []byte(script), 0o755); err != nil {
		return st, fmt.Errorf("install hook: %w", err)
	}
	if err := os.Rename(tmp, hook); err != nil {
		os.Remove(tmp)
		return st, fmt.Errorf("install hook: %w", err)
	}
	return Status(dir, false), nil
}

// ErrNotInstalled is returned by Uninstall when there is nothing to remove.
var ErrNotInstalled = errors.New("the git sandbox pre-push hook is not installed")

// Uninstall removes the hook and puts the user's own back exactly as it was.
func Uninstall(dir string) error {
	hook := filepath.Join(dir, "pre-push")
	st := Status(dir, false)
	if !st.Installed {
		return usererr.Wrap(ErrNotInstalled, "the git sandbox pre-push hook is not installed in %s", dir)
	}
	if err := os.Remove(hook); err != nil {
		return fmt.Errorf("uninstall hook: %w", err)
	}
	if st.Chained {
		if err := os.Rename(filepath.Join(dir, Chained), hook); err != nil {
			return fmt.Errorf("uninstall hook: restore your pre-push hook: %w", err)
		}
	}
	return nil
}
