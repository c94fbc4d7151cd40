package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/docker"
	"github.com/git-sandbox/git-sandbox/container/enginetest"
)

// TestEngineConformanceDocker runs the engine conformance suite (the one
// the fake and the Kubernetes engine pass in unit tests) against the real
// daemon through container/docker, with nothing declared missing. Without
// a daemon it fails, as every test here does.
func TestEngineConformanceDocker(t *testing.T) {
	t.Parallel()
	enginetest.Suite{
		Image: testImage,
		New: func(t *testing.T) container.Engine {
			d, err := docker.Connect(context.Background())
			if err != nil {
				t.Fatalf("the conformance suite needs the Docker daemon: %v", err)
			}
			return d
		},
	}.RunTests(t)
}

// TestEngineNetworksVolumesEvents drives the engine seam's newer parts
// (events, volumes, networks) and its error mapping against the real
// daemon, through container/docker itself. Everything it creates carries
// a label of its own and is removed at the end.
func TestEngineNetworksVolumesEvents(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := docker.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	tag := "e2e-engine-" + hex.EncodeToString(b)
	mine := container.LabelRepo + "=" + tag
	labels := map[string]string{container.LabelRepo: tag}
	t.Cleanup(func() {
		ctx := context.Background()
		if cs, err := d.List(ctx, mine); err == nil {
			for _, c := range cs {
				_ = d.Remove(ctx, c.ID)
			}
		}
		if ns, err := d.ListNetworks(ctx, mine); err == nil {
			for _, n := range ns {
				_ = d.RemoveNetwork(ctx, n.ID)
			}
		}
		if vs, err := d.ListVolumes(ctx, mine); err == nil {
			for _, v := range vs {
				_ = d.RemoveVolume(ctx, v.Name)
			}
		}
	})

	evctx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	events, evErrs := d.Events(evctx, mine)

	// Volumes.
	vol, err := d.CreateVolume(ctx, container.VolumeSpec{Name: tag + "-vol", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	if vol.Labels[container.LabelManaged] == "" {
		t.Errorf("volume not stamped as managed: %v", vol.Labels)
	}
	vols, err := d.ListVolumes(ctx, mine)
	if err != nil || len(vols) != 1 || vols[0].Name != tag+"-vol" {
		t.Errorf("list volumes = %+v, %v", vols, err)
	}

	// Networks: an internal one, with a container connected.
	netw, err := d.CreateNetwork(ctx, container.NetworkSpec{Name: tag + "-net", Internal: true, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	nets, err := d.ListNetworks(ctx, mine)
	if err != nil || len(nets) != 1 || nets[0].ID != netw.ID || !nets[0].Internal {
		t.Errorf("list networks = %+v, %v", nets, err)
	}
	if _, err := d.CreateNetwork(ctx, container.NetworkSpec{Name: tag + "-net", Labels: labels}); err == nil {
		t.Error("a second network of the same name was created")
	}

	spec := &container.Spec{
		Name: tag + "-c", Image: testImage, Argv: []string{"sh", "-c", "echo hello; exit 3"},
		User: "65534:65534", Network: container.NetworkOpen, Labels: map[string]string{container.LabelManaged: "1", container.LabelRepo: tag},
		Limits: container.Limits{Pids: 32, MemoryBytes: 64 << 20},
	}
	spec.Harden()
	// A missing image is named as such (the engine's "not found" is
	// checked against the image, not assumed to be about it).
	lost := spec.Clone()
	lost.Name, lost.Image = tag+"-lost", tag+"-no-such-image:x"
	if _, err := d.Create(ctx, lost); err == nil || !strings.Contains(err.Error(), "image "+lost.Image+" is not present") {
		t.Errorf("create from a missing image = %v, want the missing image named", err)
	}
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.ConnectNetwork(ctx, netw.ID, id, netip.Addr{}); err != nil {
		t.Fatalf("connect: %v", err)
	}
	// A container not running cannot be paused: the engine-agnostic conflict.
	if err := d.Pause(ctx, id); !container.IsConflict(err) {
		t.Errorf("pause of a created container = %v, want ErrConflict", err)
	}
	waitC := d.WaitExit(ctx, id, container.WaitNextExit)
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if res := <-waitC; res.Err != nil || res.Code != 3 {
		t.Errorf("wait = %+v", res)
	}
	if res := <-d.WaitExit(ctx, id, container.WaitNotRunning); res.Err != nil || res.Code != 3 {
		t.Errorf("wait on an exited container = %+v", res)
	}
	var out bytes.Buffer
	if err := d.Logs(ctx, id, container.LogsOptions{Stdout: &out}); err != nil || out.String() != "hello\n" {
		t.Errorf("logs = %q, %v", out.String(), err)
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Inspect(ctx, id); !container.IsNotFound(err) {
		t.Errorf("inspect of a removed container = %v, want ErrNotFound", err)
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Errorf("removing a missing container: %v", err)
	}

	// The events of its life, in order, filtered by our label.
	want := []container.EventAction{container.EventCreate, container.EventStart, container.EventDie, container.EventDestroy}
	var got []container.EventAction
	timeout := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream ended after %v", got)
			}
			if ev.ID != id || ev.Labels[container.LabelRepo] != tag {
				t.Errorf("event of another container: %+v", ev)
				continue
			}
			if ev.Name != tag+"-c" {
				t.Errorf("event names %q", ev.Name)
			}
			if ev.Action == container.EventDie && (ev.ExitCode == nil || *ev.ExitCode != 3) {
				t.Errorf("die event without exit code 3: %+v", ev)
			}
			got = append(got, ev.Action)
		case err := <-evErrs:
			t.Fatalf("event stream: %v", err)
		case <-timeout:
			t.Fatalf("events so far %v, want %v", got, want)
		}
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
	stopEvents()
	for range events {
		// The stream closes when its context ends.
	}

	// Removal, and removing again is not an error.
	if err := d.RemoveNetwork(ctx, netw.ID); err != nil {
		t.Errorf("remove network: %v", err)
	}
	if err := d.RemoveNetwork(ctx, netw.ID); err != nil {
		t.Errorf("remove a missing network: %v", err)
	}
	if err := d.RemoveVolume(ctx, vol.Name); err != nil {
		t.Errorf("remove volume: %v", err)
	}
	if err := d.RemoveVolume(ctx, vol.Name); err != nil {
		t.Errorf("remove a missing volume: %v", err)
	}
	if ns, _ := d.ListNetworks(ctx, mine); len(ns) != 0 {
		t.Errorf("networks left: %+v", ns)
	}
	if vs, _ := d.ListVolumes(ctx, mine); len(vs) != 0 {
		t.Errorf("volumes left: %+v", vs)
	}
}
