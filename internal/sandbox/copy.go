package sandbox

// Copy mode: a sandbox on an engine that cannot see this machine's files
// (a remote Docker Engine). Nothing of the host is bind-mounted. Volumes on
// the engine hold the worktree, the agent's private git directory, its
// home, and the state of a helper container that the agent's container
// never mounts. Start ships the objects of the start commit as a pack
// through an exec stream into the helper, which checks out; snapshots are
// taken by the helper with a configuration-free git (the agent paused
// while it reads) and come back as a pack that the host indexes with
// index-pack --strict and checks (agentrepo.ImportTree) before the
// snapshot's commit is written on the host. The host keeps every snapshot:
// losing the engine loses at most one rescue interval.

import (
	"slices"

	"github.com/git-sandbox/git-sandbox/internal/agentspec"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/workspace"
)

// planCopy turns a planned sandbox into a copy-mode one on engine: its
// files and git are volumes on the engine (workspace.VolumeMounts) instead
// of this machine's paths, and what cannot work without this machine's
// files is refused: --carry, --publish (a devcontainer's forwardPorts are
// left out). The hosts to inspect are left out too (returned): the agent
// would not trust the proxy's certificates for them, so one whose allow
// entries have rules is refused over TLS, as without inspection.
func planCopy(p *Plan, carry, publish bool, engine *config.Engine) (uninspected []string, err error) {
	asks := workspace.CopyAsks{Carry: carry, Publish: len(p.in.Ports) > 0 && publish, Mounts: len(p.in.ExtraMounts) > 0}
	if err := workspace.RefuseCopy(p.Engine, asks, config.UserPath()); err != nil {
		return nil, err
	}
	if p.Egress != nil && len(p.Egress.Secrets) > 0 {
		// The agent trusts the sandbox's CA through files mounted from
		// this machine, and the values would be kept on the engine.
		return nil, usererr.New("engine %s cannot take your [[secret]] entries yet (copy mode): the agent would not trust the proxy that puts them in", p.Engine).
			Hint("start the sandbox on a local engine, or pass --network none or open (secrets are then left out)")
	}
	if p.Egress != nil {
		uninspected, p.Egress.Inspect = p.Egress.Inspect, nil
		if err := network.ProxyOnVolumes(p.Egress); err != nil {
			return nil, err
		}
		p.Egress.SetForward(nil) // a devcontainer's forwardPorts: not published there
	}
	names := workspace.VolumeNames(p.Container.Name)
	p.Copy = &names
	in := p.in
	in.TrustDir = ""
	in.Workspace = workspace.VolumeMounts(names)
	in.Worktree, in.Ports = "", nil
	if engine.IsKubernetes() {
		// Nothing on a cluster needs this machine's uid: every Pod runs as
		// the engine's (container/kube sees to it), and so the spec says.
		uid, gid := engine.RunAs()
		in.UID, in.GID = int(uid), int(gid)
	}
	if in.UID != 0 {
		in.UserEnv = append(slices.Clip(in.UserEnv), workspace.SafeDirEnv()...)
	}
	spec, err := agentspec.Build(in)
	if err != nil {
		return nil, err
	}
	p.in, p.Container = in, spec
	p.Worktree, p.PrivateGitDir = "", ""
	return uninspected, nil
}

// engineName is the sandbox's engine as users name it.
func (s *Sandbox) engineName() string {
	if s.Record.Engine == "" {
		return "default"
	}
	return s.Record.Engine
}
