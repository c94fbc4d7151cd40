package verify

import (
	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// RunSettings are the network, runtime and limits a container of a sandbox
// runs with.
type RunSettings struct {
	Network container.NetworkMode
	Runtime string
	Limits  container.Limits
}

// ConfigSettings are the settings of the current configuration.
func ConfigSettings(cfg *config.Loaded) (RunSettings, error) {
	mem, err := config.MemoryBytes(cfg.Limits.Memory)
	if err != nil {
		return RunSettings{}, err
	}
	return RunSettings{
		Network: cfg.Network,
		Runtime: cfg.Runtime,
		Limits:  container.Limits{MemoryBytes: mem, CPUs: cfg.Limits.CPUs, Pids: cfg.Limits.Pids},
	}, nil
}

// Stricter returns, setting by setting, the stricter of s and the
// settings of the sandbox's recorded container (a record made before it
// was recorded adds nothing): the more closed network, the runtime the sandbox
// started with (else s's), and the lower of each limit (0 is no limit).
func (s RunSettings) Stricter(r *record.Record) RunSettings {
	out := s
	if r == nil || r.Spec == nil {
		return out
	}
	rec := r.Spec
	if rec.Network != "" && rec.Network.Validate() == nil && rec.Network.AtMostAsOpenAs(out.Network) {
		out.Network = rec.Network
	}
	if rec.Runtime != "" {
		out.Runtime = rec.Runtime
	}
	out.Limits.MemoryBytes = lowerLimit(out.Limits.MemoryBytes, rec.Limits.MemoryBytes)
	out.Limits.Pids = lowerLimit(out.Limits.Pids, rec.Limits.Pids)
	out.Limits.CPUs = lowerLimit(out.Limits.CPUs, rec.Limits.CPUs)
	return out
}

// lowerLimit is the stricter of two limits where 0 (or less) means none.
func lowerLimit[T int64 | float64](a, b T) T {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	case b < a:
		return b
	}
	return a
}

// ExportBudget is the configured bound on the files verify writes out.
func ExportBudget(cfg *config.Loaded) (int64, error) {
	return config.MemoryBytes(cfg.Budget.Export)
}
