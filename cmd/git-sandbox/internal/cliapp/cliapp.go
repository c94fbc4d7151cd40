// Package cliapp is what every command of git sandbox receives: the
// process's streams, the printer every message goes through, and the
// lazily opened repository, configuration and engines; and the few
// helpers the command packages share (a table, the terminal's streams).
package cliapp

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/alecthomas/kong"
	"golang.org/x/term"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/proxyimage"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// App is what every command's Run receives: the process's streams, the
// printer every message goes through, and the lazily opened repository,
// configuration and Docker client.
type App struct {
	Ctx    context.Context
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr is the raw stream, for what a container writes there; messages
	// go through UI.
	Stderr io.Writer
	UI     *ui.Printer
	Dir    string
	// Kong is the parsed command line's model (man pages).
	Kong *kong.Kong

	env *sandbox.Env
}

// IO describes the process's terminal for the sandbox package.
func (a *App) IO() sandbox.IO { return TerminalIO(a.Stdin, a.Stdout, a.Stderr) }

// Env opens the repository in the working directory and loads the
// configuration, once.
func (a *App) Env() (*sandbox.Env, error) {
	if a.env != nil {
		return a.env, nil
	}
	root, err := worktree.StateRoot()
	if err != nil {
		return nil, err
	}
	dir := a.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	userCfg, err := config.Load("")
	if err != nil {
		return nil, err
	}
	roots := []string{root}
	if userCfg.WorktreesDir != "" {
		roots = append(roots, userCfg.WorktreesDir)
	}
	repo, err := worktree.Open(a.Ctx, dir, roots...)
	if err != nil {
		return nil, err
	}
	// The repository's own file is read from its main worktree, never from
	// a sandbox worktree the agent writes.
	cfg, err := config.Load(repo.MainWorkTree)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		a.UI.Warnf("%s", w)
	}
	a.env = sandbox.NewEnv(repo, cfg, root, a.UI)
	if ProxyBinary != nil {
		a.env.ProxyBinary = sandbox.ProxyBinaryFunc(func() (proxyimage.Binary, error) { return ProxyBinary(root) })
	}
	return a.env, nil
}

// ProxyBinary, when set, returns the binary the egress proxy's image holds
// instead of this one. Only this package's script tests set it, in their
// test binary: that binary is linked dynamically, so it could not run
// alone in the proxy's image, and their fake engine only acts the proxy
// out. Nothing in the product sets it.
var ProxyBinary func(stateRoot string) (proxyimage.Binary, error)

// SelfProxyBinary is the binary the egress proxy's image holds: this one,
// checked to run alone there.
func SelfProxyBinary(stateRoot string) (proxyimage.Binary, error) {
	if ProxyBinary != nil {
		return ProxyBinary(stateRoot)
	}
	return proxyimage.Self(network.ProxyBinaryCache(stateRoot))
}

// Close closes what Env opened.
func (a *App) Close() {
	if a.env != nil {
		a.env.Close()
	}
}

// Find opens the environment and the sandbox of branch.
func (a *App) Find(branch string) (*sandbox.Env, *sandbox.Sandbox, error) {
	env, err := a.Env()
	if err != nil {
		return nil, nil, err
	}
	sb, err := env.Find(branch)
	return env, sb, err
}

// TerminalIO describes the process's standard streams.
func TerminalIO(stdin io.Reader, stdout, stderr io.Writer) sandbox.IO {
	io := sandbox.IO{Stdin: stdin, Stdout: stdout, Stderr: stderr, StdinFd: -1}
	if f, ok := stdin.(*os.File); ok {
		io.StdinFd = int(f.Fd())
		if term.IsTerminal(io.StdinFd) {
			io.StdinIsTerminal = true
		} else if fi, err := f.Stat(); err == nil {
			mode := fi.Mode()
			io.StdinIsPipe = mode&os.ModeNamedPipe != 0 || mode.IsRegular() || mode&os.ModeSocket != 0
		}
	}
	return io
}

// Table prints rows with columns padded to their widest cell.
func Table(w io.Writer, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			if n := len([]rune(c)); n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// Subdir is where the command runs (-C, or the working directory),
// relative to top, the worktree it runs in ("" at the top or outside).
func (a *App) Subdir(top string) string {
	dir := a.Dir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	rel, err := filepath.Rel(top, dir)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return ""
	}
	return filepath.ToSlash(rel)
}
