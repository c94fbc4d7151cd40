package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/engines"
	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// repoStatus is one row of ps --all-repos: a sandbox and its repository.
type repoStatus struct {
	// Repo is the REPO column: the repository's name, or its path where
	// two share a name. RepoPath is where it is (its main worktree), and
	// RepoMissing says it is no longer there.
	Repo        string `json:"repo"`
	RepoPath    string `json:"repo_path"`
	RepoMissing bool   `json:"repo_missing,omitempty"`
	sandbox.Status
}

// repoList is the sandboxes of one known repository.
type repoList struct {
	known worktree.Known
	// gone is why the repository is not where it was ("" when it is).
	gone string
	list []sandbox.Status
}

// runAll lists the sandboxes of every repository the state root knows.
func (c *PsCmd) runAll(app *App) error {
	if c.Watch {
		return usererr.New("ps --watch follows one repository").
			Hint("run git sandbox ps --watch in the repository, or git sandbox ps --all-repos without --watch")
	}
	root, err := worktree.StateRoot()
	if err != nil {
		return err
	}
	userCfg, err := config.Load("")
	if err != nil {
		return err
	}
	known, errs := record.KnownRepos(root)
	for _, err := range errs {
		app.UI.Warnf("%v", err)
	}
	conns := &sharedEngines{cfg: userCfg}
	defer conns.Close()
	roots := []string{root}
	if userCfg.WorktreesDir != "" {
		roots = append(roots, userCfg.WorktreesDir)
	}
	repos := make([]repoList, len(known))
	for i, k := range known {
		repos[i] = repoStatuses(app, k, userCfg, root, roots, conns)
	}
	rows := allRows(repos)
	defer sayGone(app, root, repos)
	if c.JSON {
		enc := termsafe.NewJSONEncoder(app.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		app.UI.Infof("no sandboxes in any repository on this machine")
		app.UI.Hintf("git sandbox start BRANCH -p \"TASK\" in a repository creates one")
		return nil
	}
	list := make([]sandbox.Status, len(rows))
	names := make([]psRepo, len(rows))
	showEng := len(userCfg.Engines) > 0
	for i, r := range rows {
		list[i], names[i] = r.Status, psRepo{name: termsafe.String(r.Repo), missing: r.RepoMissing}
		showEng = showEng || r.Engine != ""
	}
	psTable(app.Stdout, list, names, showEng, c.Wide)
	psNotes(app, list)
	return nil
}

// sayGone names, below ps --all-repos's output, each repository that is
// not where it was, and what to do.
func sayGone(app *App, root string, repos []repoList) {
	for _, r := range repos {
		if r.gone == "" {
			continue
		}
		app.UI.Warnf("repository %s is not at %s any more (%s): its %d sandbox(es) are listed from their records", termsafe.String(r.known.Name), termsafe.String(shortPath(r.known.MainWorkTree)), termsafe.String(r.gone), len(r.list))
		app.UI.Hintf("move it back there to land or remove them; their state is in %s", termsafe.String(filepath.Join(root, r.known.ID)))
	}
}

// repoStatuses is what ps says of one known repository's sandboxes: in
// full where it still is, from the records and the engines where it was
// moved or deleted.
func repoStatuses(app *App, k worktree.Known, userCfg *config.Loaded, root string, roots []string, conns sandbox.Connector) repoList {
	out := repoList{known: k}
	r, err := k.Open(app.Ctx, roots...)
	if err != nil {
		out.gone = err.Error()
		if ue, ok := usererr.As(err); ok {
			out.gone = ue.Msg
		}
		env := sandbox.NewGoneEnv(k, userCfg, root, app.UI)
		env.Engines = conns
		out.list = env.RecordedStatuses(app.Ctx)
		return out
	}
	cfg, err := config.Load(r.MainWorkTree)
	if err != nil {
		app.UI.Warnf("%s: %v", termsafe.String(k.Name), err)
		cfg = userCfg
	}
	env := sandbox.NewEnv(r, cfg, root, app.UI)
	env.Engines = conns
	list, err := env.Statuses(app.Ctx)
	if err != nil {
		app.UI.Warnf("%s: %v", termsafe.String(k.Name), err)
		list = env.RecordedStatuses(app.Ctx)
	}
	out.list = list
	return out
}

// allRows are the rows of every repository, named by their directory, or
// by their path where two repositories share a name.
func allRows(repos []repoList) []repoStatus {
	count := map[string]int{}
	for _, r := range repos {
		count[r.known.Name]++
	}
	rows := []repoStatus{}
	for _, r := range repos {
		name := r.known.Name
		if count[name] > 1 && r.known.MainWorkTree != "" {
			name = shortPath(r.known.MainWorkTree)
		}
		if r.gone != "" {
			name += " (missing)"
		}
		for _, s := range r.list {
			rows = append(rows, repoStatus{Repo: name, RepoPath: r.known.MainWorkTree, RepoMissing: r.gone != "", Status: s})
		}
	}
	return rows
}

// shortPath is p with the home directory written ~.
func shortPath(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" || home == "/" {
		return p
	}
	if rel, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
		return filepath.Join("~", rel)
	}
	return p
}

// sharedEngines reaches each engine once for every repository ps
// --all-repos lists, and closes them at the end.
type sharedEngines struct {
	cfg   *config.Loaded
	mu    sync.Mutex
	conns map[string]*sharedConn
}

type sharedConn struct {
	once sync.Once
	eng  sandbox.Engine
	err  error
}

// Connect implements sandbox.Connector.
func (s *sharedEngines) Connect(ctx context.Context, name string) (sandbox.Engine, error) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[string]*sharedConn{}
	}
	c := s.conns[name]
	if c == nil {
		c = &sharedConn{}
		s.conns[name] = c
	}
	s.mu.Unlock()
	c.once.Do(func() { c.eng, c.err = engines.Connect(ctx, s.cfg, name) })
	return c.eng, c.err
}

// Close closes every engine reached.
func (s *sharedEngines) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if c.eng != nil {
			c.eng.Close()
		}
	}
}
