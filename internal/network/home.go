package network

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// A sandbox's home directory is its own, new for every sandbox: nothing
// one sandbox's agent writes there (~/.bashrc, ~/.gitconfig, settings with
// hooks, package manager configuration) reaches another. Only the files an
// agent adapter names as its login (LoginPaths) persist: they are copied
// from the login store into the home before the agent runs (after setup,
// so a repository's setup never sees them) and back when it exits (a login
// made or refreshed inside the sandbox is kept). The store is per agent, or
// per agent and repository with agent_home = "per-repo".
//
// Every host-side access to a home goes through os.Root: the agent may have
// replaced any directory in it with a symlink, and the host must not follow
// one out of the home. Only regular files are copied, opened without
// following a last symlink and without blocking on a FIFO, up to
// maxLoginFile bytes.

// maxLoginFile is the largest login file copied.
const maxLoginFile = 4 << 20

// LoginStore is where the login of the sandboxes this Env starts with the
// agent persists.
func (e *Env) LoginStore(agentName string) string {
	if e.Config.AgentHome == config.AgentHomePerRepo {
		return e.Layout.Logins(agentName, e.Repo.ID)
	}
	return e.Layout.Logins(agentName, "")
}

// NewLoginStore makes the login store when it is missing. The shared
// store, made for the first time, takes the login paths of the home the
// agent had before homes were per sandbox (the old shared home), so a user
// stays logged in; a per-repository store starts empty (what every
// repository's agent could write is not carried into it).
func (e *Env) NewLoginStore(a agent.Adapter, store string) error {
	if _, err := os.Lstat(store); err == nil {
		return nil
	}
	if err := os.MkdirAll(store, 0o700); err != nil {
		return fmt.Errorf("create the login store: %w", err)
	}
	if store != e.Layout.Logins(a.Name(), "") {
		return nil
	}
	old := e.Layout.AgentHome(a.Name())
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	if err := copyLogin(old, store, a.LoginPaths()); err != nil {
		e.UI.Warnf("the login of %s was not taken from its old home: %v", a.Name(), err)
	}
	return nil
}

// LoadLogin copies the agent's login from the store into the sandbox's home.
func (e *Env) LoadLogin(s *record.Record) error {
	a, ok := loginAdapter(s)
	if !ok {
		return nil
	}
	if err := copyLogin(s.LoginStore, e.Layout.Home(s.Branch), a.LoginPaths()); err != nil {
		return fmt.Errorf("copy the %s login into the sandbox: %w", a.Name(), err)
	}
	return nil
}

// SaveLogin copies the agent's login from the sandbox's home back into the
// store. The container must not be running a setup (which may not write
// the login others use): callers call it after the agent ran.
func (e *Env) SaveLogin(s *record.Record) error {
	a, ok := loginAdapter(s)
	if !ok {
		return nil
	}
	if err := copyLogin(e.Layout.Home(s.Branch), s.LoginStore, a.LoginPaths()); err != nil {
		return fmt.Errorf("keep the %s login of the sandbox: %w", a.Name(), err)
	}
	return nil
}

// ClearLogin removes the login files from the sandbox's home (after
// keeping them), so that a setup about to run again does not find them.
func (e *Env) ClearLogin(s *record.Record) error {
	a, ok := loginAdapter(s)
	if !ok {
		return nil
	}
	if err := e.SaveLogin(s); err != nil {
		return err
	}
	root, err := os.OpenRoot(e.Layout.Home(s.Branch))
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range a.LoginPaths() {
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the login from the sandbox's home: %w", err)
		}
	}
	return nil
}

// loginAdapter is the sandbox's agent when its login is kept in a store
// (sandboxes made before homes were per sandbox mount the old shared home
// and have no store).
func loginAdapter(s *record.Record) (agent.Adapter, bool) {
	if s.LoginStore == "" {
		return nil, false
	}
	a, err := agent.Get(s.Agent)
	if err != nil || len(a.LoginPaths()) == 0 {
		return nil, false
	}
	return a, true
}

// copyLogin copies the files at paths (relative, slash-separated) from
// the directory src to dst. A path missing in src is left alone in dst; a
// path that is not a regular file in src is an error.
func copyLogin(src, dst string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	from, err := os.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	to, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer to.Close()
	var errs []error
	for _, p := range paths {
		if err := copyOne(from, to, p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

func copyOne(from, to *os.Root, p string) error {
	p = path.Clean(p)
	if path.IsAbs(p) || p == "." || strings.HasPrefix(p, "../") {
		return fmt.Errorf("not a path inside the home")
	}
	f, err := from.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	if fi.Size() > maxLoginFile {
		return fmt.Errorf("larger than %d bytes", maxLoginFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxLoginFile+1))
	if err != nil {
		return err
	}
	if len(b) > maxLoginFile {
		return fmt.Errorf("larger than %d bytes", maxLoginFile)
	}
	if dir := path.Dir(p); dir != "." {
		if err := to.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	tmp := p + ".git-sandbox-tmp"
	_ = to.Remove(tmp)
	w, err := to.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := w.Write(b); err != nil {
		w.Close()
		_ = to.Remove(tmp)
		return err
	}
	if err := w.Close(); err != nil {
		_ = to.Remove(tmp)
		return err
	}
	if err := to.Rename(tmp, p); err != nil {
		_ = to.Remove(tmp)
		return err
	}
	return nil
}
