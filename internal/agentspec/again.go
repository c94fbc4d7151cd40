package agentspec

import (
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Again is what changes when an existing sandbox's container is made again
// from its recorded spec (a follow-up task, --rerun with new limits): the
// command and terminal, the task, the limits and verify given at this
// start. Everything else — image, mounts, hardening, network — stays.
type Again struct {
	// Argv is the container's whole command (wrappers included).
	Argv []string
	// TTY and OpenStdin are this start's terminal and stdin.
	TTY, OpenStdin bool
	// Prompt is the task's ("" keeps no GIT_SANDBOX_PROMPT).
	Prompt string
	// Memory, CPUs and Pids replace the limits when set.
	Memory string
	CPUs   float64
	Pids   int64
	// Verify replaces the verify label when set.
	Verify string
}

// Rebuild changes spec, a sandbox's recorded container spec, as a says,
// and checks it again: the host paths it mounts are resolved anew (one
// that now resolves to your home, the root or a daemon socket is
// refused), and the spec is validated as a new one is.
func Rebuild(spec *container.Spec, a Again) error {
	spec.Argv = a.Argv
	spec.TTY, spec.OpenStdin = a.TTY, a.OpenStdin
	spec.StdinOnce = spec.OpenStdin && !spec.TTY
	var env []string
	for _, kv := range spec.Env {
		if !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "GIT_SANDBOX_PROMPT=") {
			env = append(env, kv)
		}
	}
	if a.TTY {
		env = append(env, terminalEnv())
	}
	if a.Prompt != "" {
		env = append(env, "GIT_SANDBOX_PROMPT="+a.Prompt)
		spec.Labels[container.LabelPrompt] = a.Prompt
	}
	spec.Env = env
	if err := a.limits(&spec.Limits); err != nil {
		return err
	}
	if a.Verify != "" {
		spec.Labels[container.LabelVerify] = a.Verify
	}
	for i, m := range spec.Mounts {
		if m.Volume {
			continue // the engine's own (caches; copy mode's files)
		}
		src, err := container.RefuseUnsafeHostPath(m.Why, m.Source)
		if err != nil {
			return err
		}
		spec.Mounts[i].Source = src
	}
	return spec.Validate()
}

func (a Again) limits(l *container.Limits) error {
	if a.Memory != "" {
		mem, err := config.MemoryBytes(a.Memory)
		if err != nil {
			return usererr.New("--memory %q: %v", a.Memory, err)
		}
		l.MemoryBytes = mem
	}
	if a.CPUs > 0 {
		l.CPUs = a.CPUs
	}
	if a.Pids > 0 {
		l.Pids = a.Pids
	}
	return nil
}
