package sandbox

import (
	"slices"
	"strings"
)

// Redacted is the value shown instead of a passed-through variable's.
const Redacted = "<redacted>"

// Redacted returns a copy of the plan for showing: the values of the
// variables passed from the host (-e, env in the config) are replaced by
// Redacted, so a plan can be read, pasted and kept without leaking a token.
// The container is created from the plan itself, never from this copy.
func (p *Plan) Redacted() *Plan {
	if p == nil {
		return nil
	}
	out := *p
	if p.Container == nil {
		return &out
	}
	spec := *p.Container
	spec.Env = slices.Clone(spec.Env)
	for i, kv := range spec.Env {
		k, _, ok := strings.Cut(kv, "=")
		if ok && slices.Contains(p.passed, k) {
			spec.Env[i] = k + "=" + Redacted
		}
	}
	out.Container = &spec
	return &out
}

// envNames returns the names of KEY=VALUE entries.
func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	return names
}
