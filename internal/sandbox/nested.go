package sandbox

import (
	"context"
	"errors"
	"strings"

	"github.com/git-sandbox/git-sandbox/internal/record"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Nested repositories: a git repository the agent makes inside its
// worktree (git init src, a clone, a directory laid out as a bare
// repository) has a configuration the agent wrote, and any git the user
// runs in that directory on the host — a shell prompt, an editor — reads
// it (core.fsmonitor runs a command). While the agent does not run, their
// git directories are kept in the sandbox's state (quarantined); they go
// back just before its container starts again.

// quarantineNested moves the git directories of nested repositories out of
// the worktree, unless the agent's container runs (checked under the
// snapshot lock, which a start holds while it restores them). Failures are
// warnings: the work is not at stake, only what a host git would read.
func (s *Sandbox) quarantineNested(ctx context.Context) {
	unlock, err := record.Lock(s.env.Layout.Lock(s.Branch))
	if err != nil {
		s.env.UI.Warnf("nested repositories were not quarantined: %v", err)
		return
	}
	defer unlock()
	s.quarantineLocked(ctx)
}

// quarantineLocked is quarantineNested for a caller holding the snapshot
// lock.
func (s *Sandbox) quarantineLocked(ctx context.Context) {
	if st, err := s.ContainerState(ctx); err != nil || (st != nil && st.Running) {
		return
	}
	if err := s.Workspace().Quarantine(ctx); err != nil {
		s.env.UI.Warnf("%s: not every nested repository could be quarantined: %v", s.Display(), err)
		if errors.Is(err, worktree.ErrCrossDevice) {
			s.env.UI.Hintf("a git run in them reads the configuration the agent wrote; keep worktrees_dir on the state's file system")
		}
	}
}

// restoreNested puts quarantined git directories back before the agent's
// container starts; the caller holds the snapshot lock. The workspace
// names each one where a git of this machine could run in it.
func (e *Env) restoreNested(ctx context.Context, sb *Sandbox) error {
	if _, err := sb.Workspace().Unquarantine(ctx); err != nil {
		return usererr.Wrap(err, "cannot put back the nested repositories of %s: %v", sb.Display(), err).
			Hint("the git directories are kept %s (listed in %s); move the path that is in the way, then start again", sb.Workspace().NestedKept(), worktree.QuarantineRecord(e.Layout.Quarantine(sb.Branch)))
	}
	return nil
}

// WarnNested names each nested repository of a sandbox whose agent runs
// (from its newest snapshot), for ps, diff and start.
func (s *Sandbox) WarnNested(nested []string) { s.Workspace().WarnNested(nested) }

// nestedRefusal is the error of land and rm for a sandbox holding nested
// repositories: their files are in no snapshot, so removing the worktree
// loses them.
func nestedRefusal(s *Sandbox, nested []string, what string) error {
	quoted := make([]string, len(nested))
	for i, p := range nested {
		quoted[i] = termsafe.String(p)
	}
	return usererr.New("%s holds %d nested git repositor%s whose files are in no snapshot: %s", s.Display(), len(nested), plural(len(nested), "y", "ies"), strings.Join(quoted, ", ")).
		Hint("%s", s.Workspace().NestedCopyHint(quoted[0])).
		Hint("%s --force %s removes them with the sandbox; %s", what, s.Display(), "nothing else was changed").
		WithCode(usererr.ExitRefused)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
