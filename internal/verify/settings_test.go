package verify

import (
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

func TestRunSettingsStricter(t *testing.T) {
	cfg := RunSettings{Network: container.NetworkOpen, Limits: container.Limits{MemoryBytes: 8 << 30, CPUs: 4, Pids: 4096}}
	tests := []struct {
		name string
		cur  RunSettings
		rec  *record.Record
		want RunSettings
	}{
		{"no record", cfg, nil, cfg},
		{"an old record adds nothing", cfg, &record.Record{}, cfg},
		{
			"the record is stricter",
			cfg,
			&record.Record{Spec: record.ContainerOf(&container.Spec{Network: container.NetworkNone, Runtime: "runsc", Limits: container.Limits{MemoryBytes: 1 << 30, CPUs: 1, Pids: 64}})},
			RunSettings{Network: container.NetworkNone, Runtime: "runsc", Limits: container.Limits{MemoryBytes: 1 << 30, CPUs: 1, Pids: 64}},
		},
		{
			"the config is stricter",
			RunSettings{Network: container.NetworkNone, Runtime: "runsc", Limits: container.Limits{MemoryBytes: 1 << 30, CPUs: 1, Pids: 64}},
			&record.Record{Spec: record.ContainerOf(&container.Spec{Network: container.NetworkOpen, Limits: container.Limits{MemoryBytes: 8 << 30, CPUs: 4, Pids: 4096}})},
			RunSettings{Network: container.NetworkNone, Runtime: "runsc", Limits: container.Limits{MemoryBytes: 1 << 30, CPUs: 1, Pids: 64}},
		},
		{
			"no limit is the loosest",
			RunSettings{Network: container.NetworkOpen},
			&record.Record{Spec: record.ContainerOf(&container.Spec{Limits: container.Limits{MemoryBytes: 1 << 30, Pids: 64}})},
			RunSettings{Network: container.NetworkOpen, Limits: container.Limits{MemoryBytes: 1 << 30, Pids: 64}},
		},
		{
			"the record's runtime stays",
			RunSettings{Network: container.NetworkOpen, Runtime: "kata-runtime"},
			&record.Record{Spec: record.ContainerOf(&container.Spec{Runtime: "runsc"})},
			RunSettings{Network: container.NetworkOpen, Runtime: "runsc"},
		},
		{
			"an allowlist sandbox never verifies in the open",
			cfg,
			&record.Record{Spec: record.ContainerOf(&container.Spec{Network: container.NetworkAllowlist})},
			RunSettings{Network: container.NetworkAllowlist, Limits: cfg.Limits},
		},
		{
			"an invalid recorded network is ignored",
			cfg,
			&record.Record{Spec: record.ContainerOf(&container.Spec{Network: "host"})},
			cfg,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cur.Stricter(tt.rec); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
