package workspace

import (
	"os"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// BindMounts are the agent container's mounts of a bind workspace: the
// worktree, the gitfile over its .git, the agent's own repository and the
// object stores it borrows from, the user's hooks (when there are any)
// and the sandbox's home. Their sources are this machine's paths, checked
// by the caller before anything is mounted.
func BindMounts(l worktree.Layout, branch, worktreePath, hooksDir string) []container.Mount {
	mounts := []container.Mount{
		{Source: worktreePath, Target: container.Workspace, Why: "the sandbox worktree"},
		{Source: l.Gitfile(branch), Target: container.Workspace + "/.git", ReadOnly: true, Why: "gitfile pointing at the agent's own repository; a mount point cannot be renamed or replaced"},
		{Source: l.PrivateGitDir(branch), Target: l.PrivateGitDir(branch), Why: "the agent's own repository (alternates to the two stores below)"},
		{Source: VisibleStore(l).Objects(), Target: VisibleStore(l).Objects(), ReadOnly: true, Why: "the objects your branches and tags reach (not your object store), read-only"},
		{Source: l.GivenObjects(branch), Target: l.GivenObjects(branch), ReadOnly: true, Why: "the objects given to this sandbox beyond those (work carried in, updates), read-only"},
	}
	if _, err := os.Stat(hooksDir); hooksDir != "" && err == nil {
		mounts = append(mounts, container.Mount{Source: hooksDir, Target: hooksDir, ReadOnly: true, Why: "the user's hooks, read-only, used as the agent repository's hooks path"})
	}
	return append(mounts, container.Mount{Source: l.Home(branch), Target: container.Home, Why: "the sandbox's own home, new for this sandbox (only the agent's login is copied in)"})
}
