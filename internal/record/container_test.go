package record

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
)

// A record written while it held container.Spec as JSON (captured from
// that code, 2026-12) loads into record.Container field by field, and is
// written back byte for byte: the format on users' disks is unchanged.
func TestRecordOfTheSpecEraLoads(t *testing.T) {
	const file = "testdata/record-spec-2026-12.json"
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Spec
	if c == nil || c.Name != "git-sandbox-repo-feature-0a1b2c3d" || c.Image != "git-sandbox:latest" || c.User != "1000:1000" ||
		c.WorkDir != "/workspace" || c.Hostname != "feature" || len(c.Argv) != 4 || c.Env[1] != "A=b=c" {
		t.Fatalf("container = %+v", c)
	}
	if c.Network != container.NetworkAllowlist || c.NetworkName != "git-sandbox-net-r1-feature" || !c.ReadOnlyRoot || c.Runtime != "runsc" ||
		!c.TTY || !c.OpenStdin || c.StdinOnce || !c.Init || c.CapDrop[0] != "ALL" || c.Security[0] != "no-new-privileges" {
		t.Errorf("settings = %+v", c)
	}
	if c.Limits != (Limits{MemoryBytes: 4 << 30, CPUs: 2.5, Pids: 512}) || c.Labels["git-sandbox.role"] != "agent" {
		t.Errorf("limits %+v, labels %v", c.Limits, c.Labels)
	}
	if len(c.Mounts) != 3 || c.Mounts[0].Why != "the worktree" || !c.Mounts[1].ReadOnly || !c.Mounts[2].Volume || !c.Mounts[2].NoCopy {
		t.Errorf("mounts = %+v", c.Mounts)
	}
	if p := r.Ports(); len(p) != 2 || p[0] != (container.Port{HostIP: "127.0.0.1", HostPort: 8080, Port: 80}) || p[1].HostPort != 0 {
		t.Errorf("ports = %+v", p)
	}
	if r.Network() != container.NetworkAllowlist {
		t.Errorf("network = %q", r.Network())
	}
	again := filepath.Join(t.TempDir(), "record.json")
	if err := Save(again, r); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(again); !bytes.Equal(b, old) {
		t.Errorf("written back differently:\n%s\nwas:\n%s", b, old)
	}
}

// The record's container and the spec marshal alike, field for field, and
// convert into each other without loss, full or sparse.
func TestContainerConvertsToAndFromTheSpec(t *testing.T) {
	full := &container.Spec{
		Name: "n", Image: "i", Argv: []string{"a"}, Env: []string{"E=1"}, User: "1:2", WorkDir: "/w", Hostname: "h",
		Labels: map[string]string{"k": "v"},
		Mounts: []container.Mount{{Source: "/s", Target: "/t", ReadOnly: true, Why: "w"}, {Source: "vol", Target: "/v", Volume: true, NoCopy: true}},
		Ports:  []container.Port{{HostIP: container.Loopback, HostPort: 1, Port: 2}},
		Limits: container.Limits{MemoryBytes: 1, CPUs: 0.5, Pids: 3}, Network: container.NetworkOpen, NetworkName: "net",
		NetworkAlias: "agent", ReadOnlyRoot: true, Runtime: "runsc", TTY: true, OpenStdin: true, StdinOnce: true, AutoRemove: true,
		ToolImage: true, Entrypoint: []string{"/git-sandbox"}, NoHealthcheck: true,
	}
	full.Harden()
	for name, spec := range map[string]*container.Spec{"full": full, "sparse": {Name: "n", Labels: map[string]string{}}} {
		want, _ := json.Marshal(spec)
		c := ContainerOf(spec)
		got, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the record's JSON differs from the spec's:\n%s\n%s", name, got, want)
		}
		if back := c.ToSpec(); !reflect.DeepEqual(back, spec) {
			t.Errorf("%s: round trip:\n%+v\n%+v", name, back, spec)
		}
	}
	if c := ContainerOf(full); c.ToSpec() == full || &c.ToSpec().Argv[0] == &full.Argv[0] {
		t.Error("the conversion shares memory with the spec")
	}
}

// Every field of container.Spec has its counterpart here: a field added
// to the spec fails this test until the record decides whether to keep it
// (a field here and in both conversions) or not (named in unrecorded).
func TestContainerHasEveryFieldOfTheSpec(t *testing.T) {
	unrecorded := map[string]bool{}
	spec, rec := reflect.TypeOf(container.Spec{}), reflect.TypeOf(Container{})
	for i := range spec.NumField() {
		f := spec.Field(i)
		if unrecorded[f.Name] {
			continue
		}
		g, ok := rec.FieldByName(f.Name)
		if !ok {
			t.Errorf("container.Spec.%s has no field in record.Container", f.Name)
			continue
		}
		if f.Tag.Get("json") != g.Tag.Get("json") {
			t.Errorf("%s: json %q in the spec, %q in the record", f.Name, f.Tag.Get("json"), g.Tag.Get("json"))
		}
	}
	if spec.NumField()-len(unrecorded) != rec.NumField() {
		t.Errorf("record.Container has %d fields, container.Spec %d (%d not recorded)", rec.NumField(), spec.NumField(), len(unrecorded))
	}
}
