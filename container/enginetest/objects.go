package enginetest

import (
	"bytes"
	"errors"
	"net/netip"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
)

// eventWait bounds the wait for one event (an engine may poll: the
// Kubernetes engine reads its containers every second).
const eventWait = 30 * time.Second

// testEvents: the state changes of the containers carrying the labels
// asked for come in order, with the exit code on die; others do not come.
// Each change is awaited before the next is made: an engine may poll (the
// Kubernetes engine reads its containers every second), and a container
// made and gone between two reads was never seen.
func testEvents(x *env) {
	evs, errs := x.e.Events(x.ctx, x.label)
	x.awaitLive(evs, errs)
	other := x.spec("ev-other", Program{})
	delete(other.Labels, container.LabelRepo)
	oid := x.create(other)
	x.Cleanup(func() { _ = x.e.Remove(x.ctx, oid) })
	s := x.spec("ev", Program{Code: 3})
	id := x.create(s)
	ev := x.expect(evs, errs, id, container.EventCreate, oid)
	if ev.Name != s.Name || ev.Labels[container.LabelRepo] != x.tag {
		x.Errorf("create event %+v: want name %s and the container's labels", ev, s.Name)
	}
	if res := x.runToEnd(id); res.Err != nil || res.Code != 3 {
		x.Fatalf("run = %+v", res)
	}
	if ev := x.expect(evs, errs, id, container.EventDie, oid); ev.ExitCode == nil || *ev.ExitCode != 3 {
		x.Errorf("die without exit code 3: %+v", ev)
	}
	if err := x.e.Remove(x.ctx, id); err != nil {
		x.Fatal(err)
	}
	x.expect(evs, errs, id, container.EventDestroy, oid)
}

// expect reads events until id's action comes, and returns it. Another
// container's events are passed over (the markers'), but never those of
// unlabelled (a container without the label asked for); of id's own, only
// start may come first (an engine that polls may miss it).
func (x *env) expect(evs <-chan container.Event, errs <-chan error, id string, action container.EventAction, unlabelled string) container.Event {
	x.Helper()
	for {
		ev := x.nextEvent(evs, errs, action)
		switch {
		case ev.ID == unlabelled || ev.Labels[container.LabelRepo] != x.tag:
			x.Errorf("an event of a container without the label: %+v", ev)
		case ev.ID != id:
		case ev.Action == action:
			return ev
		case ev.Action != container.EventStart:
			x.Fatalf("event %s of %s, want %s next", ev.Action, ev.Name, action)
		}
	}
}

// awaitLive returns once the event stream reports changes: it makes
// marker containers until one's creation (or removal) comes through, so
// that an engine that reads its state for a first time in the background
// cannot take the test's containers for ones it had already.
func (x *env) awaitLive(evs <-chan container.Event, errs <-chan error) {
	x.Helper()
	for i := range 5 {
		id := x.create(x.spec("ev-marker-"+string(rune('a'+i)), Program{}))
		deadline := time.After(3 * time.Second)
		for {
			select {
			case ev, ok := <-evs:
				if !ok {
					x.Fatal("the event stream ended")
				}
				if ev.ID == id {
					return
				}
				continue
			case err := <-errs:
				x.Fatalf("event stream: %v", err)
			case <-deadline:
			}
			break
		}
	}
	x.Fatal("no event came for five new containers")
}

// nextEvent is the next event, failing the test when none comes in time.
func (x *env) nextEvent(evs <-chan container.Event, errs <-chan error, want container.EventAction) container.Event {
	x.Helper()
	select {
	case ev, ok := <-evs:
		if !ok {
			x.Fatalf("the event stream ended; still waiting for %s", want)
		}
		return ev
	case err := <-errs:
		x.Fatalf("event stream: %v", err)
	case <-time.After(eventWait):
		x.Fatalf("no event in %s; still waiting for %s", eventWait, want)
	}
	return container.Event{}
}

// testVolumes: a volume is made (again without harm), listed by label,
// mounted, and removed (again without harm).
func testVolumes(x *env) {
	name := x.name("vol")
	labels := map[string]string{container.LabelRepo: x.tag}
	v, err := x.e.CreateVolume(x.ctx, container.VolumeSpec{Name: name, Labels: labels})
	if err != nil || v.Name != name {
		x.Fatalf("create volume = %+v, %v", v, err)
	}
	if again, err := x.e.CreateVolume(x.ctx, container.VolumeSpec{Name: name, Labels: labels}); err != nil || again.Name != name {
		x.Errorf("a volume made twice = %+v, %v; want the volume", again, err)
	}
	other := x.name("vol-other")
	if _, err := x.e.CreateVolume(x.ctx, container.VolumeSpec{Name: other}); err != nil {
		x.Fatal(err)
	}
	x.Cleanup(func() { _ = x.e.RemoveVolume(x.ctx, other) })
	list, err := x.e.ListVolumes(x.ctx, x.label)
	if err != nil || len(list) != 1 || list[0].Name != name || list[0].Labels[container.LabelRepo] != x.tag {
		x.Errorf("list volumes = %+v, %v", list, err)
	}
	s := x.spec("vol-user", Program{})
	s.Mounts = []container.Mount{{Source: name, Target: "/v", Volume: true, NoCopy: true}}
	if res, err := container.Run(x.ctx, x.e, s, container.RunOptions{}); err != nil || res.Err != nil || res.Code != 0 {
		x.Errorf("a container with the volume = %+v, %v", res, err)
	}
	if err := x.e.RemoveVolume(x.ctx, name); err != nil {
		x.Fatalf("remove volume: %v", err)
	}
	if err := x.e.RemoveVolume(x.ctx, name); err != nil {
		x.Errorf("removing a missing volume: %v", err)
	}
	if list, err := x.e.ListVolumes(x.ctx, x.label); err != nil || len(list) != 0 {
		x.Errorf("volumes after removal: %+v, %v", list, err)
	}
}

// testVolumeFiles: what one container writes into a volume, the next
// reads (opened to the user first, as git sandbox does, when the engine
// says its new volumes are root's).
func testVolumeFiles(x *env) {
	x.need(Files)
	x.need(Attach)
	name := x.name("files")
	if _, err := x.e.CreateVolume(x.ctx, container.VolumeSpec{Name: name, Labels: map[string]string{container.LabelRepo: x.tag}}); err != nil {
		x.Fatal(err)
	}
	mount := []container.Mount{{Source: name, Target: "/v", Volume: true, NoCopy: true}}
	shell := func(what, user, cmd string) (container.WaitResult, string, error) {
		s := x.spec(what, Program{})
		s.Argv, s.Mounts = []string{"/bin/sh", "-c", cmd}, mount
		if user != "" {
			s.User = user
		}
		var out bytes.Buffer
		res, err := container.Run(x.ctx, x.e, s, container.RunOptions{Streams: container.Streams{Stdout: &out}})
		return res, out.String(), err
	}
	if !x.e.Abilities().VolumesWritable {
		if res, _, err := shell("files-open", "0:0", "chmod 0777 /v"); err != nil || res.Code != 0 {
			x.Fatalf("open the volume = %+v, %v", res, err)
		}
	}
	if res, _, err := shell("files-write", "", "echo kept >/v/f"); err != nil || res.Code != 0 {
		x.Fatalf("write = %+v, %v", res, err)
	}
	if res, out, err := shell("files-read", "", "cat /v/f"); err != nil || res.Code != 0 || out != "kept\n" {
		x.Errorf("read = %+v, %q, %v", res, out, err)
	}
}

// testNetworks: networks are made internal or not, listed by label, joined
// by containers, and removed (again without harm).
func testNetworks(x *env) {
	labels := map[string]string{container.LabelRepo: x.tag}
	in, err := x.e.CreateNetwork(x.ctx, container.NetworkSpec{Name: x.name("in"), Internal: true, Labels: labels})
	if err != nil || in.ID == "" || in.Name != x.name("in") || !in.Internal {
		x.Fatalf("create an internal network = %+v, %v", in, err)
	}
	out, err := x.e.CreateNetwork(x.ctx, container.NetworkSpec{Name: x.name("out"), Labels: labels})
	if err != nil || out.Internal {
		x.Fatalf("create a network = %+v, %v", out, err)
	}
	list, err := x.e.ListNetworks(x.ctx, x.label)
	if err != nil || len(list) != 2 {
		x.Fatalf("list networks = %+v, %v", list, err)
	}
	for _, n := range list {
		if n.Internal != (n.ID == in.ID) || n.Labels[container.LabelRepo] != x.tag {
			x.Errorf("listed network %+v", n)
		}
	}
	// As a sandbox's proxy: made on one network, then joined to another.
	s := x.spec("net", Program{})
	s.Network, s.NetworkName = container.NetworkOpen, out.Name
	id := x.create(s)
	if err := x.e.ConnectNetwork(x.ctx, in.ID, id, netip.Addr{}); err != nil {
		x.Errorf("connect: %v", err)
	}
	// A missing network is not checked: Docker 20.10 takes it for a
	// container that does not run (and its start fails).
	if err := x.e.ConnectNetwork(x.ctx, in.ID, x.name("missing"), netip.Addr{}); !container.IsNotFound(err) {
		x.Errorf("connect a missing container = %v, want ErrNotFound", err)
	}
	if err := x.e.Remove(x.ctx, id); err != nil {
		x.Fatal(err)
	}
	for _, n := range []*container.Network{in, out} {
		if err := x.e.RemoveNetwork(x.ctx, n.ID); err != nil {
			x.Errorf("remove network %s: %v", n.Name, err)
		}
		if err := x.e.RemoveNetwork(x.ctx, n.ID); err != nil {
			x.Errorf("removing a missing network: %v", err)
		}
	}
	if list, err := x.e.ListNetworks(x.ctx, x.label); err != nil || len(list) != 0 {
		x.Errorf("networks after removal: %+v, %v", list, err)
	}
}

// testFixedAddresses: on an engine with fixed addresses a member joins a
// network (whose members are numbered in a range of its own) at the
// address asked for, outside that range, and a second member asking for
// it is refused with ErrAddressInUse; an engine without them refuses any
// address.
func testFixedAddresses(x *env) {
	labels := map[string]string{container.LabelRepo: x.tag}
	out, err := x.e.CreateNetwork(x.ctx, container.NetworkSpec{Name: x.name("way-out"), Labels: labels})
	if err != nil {
		x.Fatal(err)
	}
	member := func(what string) string {
		s := x.spec(what, Program{Forever: true})
		s.Network, s.NetworkName = container.NetworkOpen, out.Name
		id := x.create(s)
		if err := x.e.Start(x.ctx, id); err != nil {
			x.Fatalf("start %s: %v", what, err)
		}
		return id
	}
	if !x.e.Abilities().FixedAddresses {
		in, err := x.e.CreateNetwork(x.ctx, container.NetworkSpec{Name: x.name("in"), Internal: true, Labels: labels})
		if err != nil {
			x.Fatal(err)
		}
		if err := x.e.ConnectNetwork(x.ctx, in.ID, member("one"), netip.MustParseAddr("10.0.0.30")); !container.IsNotSupported(err) {
			x.Errorf("connect at an address = %v, want ErrNotSupported", err)
		}
		return
	}
	in, sub := x.addressedNetwork(labels)
	last := sub.Addr().As4()
	last[3] += 30
	addr := netip.AddrFrom4(last)
	if err := x.e.ConnectNetwork(x.ctx, in.ID, member("one"), addr); err != nil {
		x.Fatalf("connect at %v: %v", addr, err)
	}
	if err := x.e.ConnectNetwork(x.ctx, in.ID, member("two"), addr); !errors.Is(err, container.ErrAddressInUse) {
		x.Errorf("connect a second member at %v = %v, want ErrAddressInUse", addr, err)
	}
}

// addressedNetwork makes an internal network on a /27 of its own whose
// members are numbered in its lower half.
func (x *env) addressedNetwork(labels map[string]string) (*container.Network, netip.Prefix) {
	x.Helper()
	seed := int(x.tag[len(x.tag)-1]) + int(x.tag[len(x.tag)-2])<<8
	for i := range 32 {
		k := (seed + i*97) % 2048
		sub := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 214, byte(k >> 3), byte(k&7) << 5}), 27)
		n, err := x.e.CreateNetwork(x.ctx, container.NetworkSpec{
			Name: x.name("in"), Internal: true, Subnet: sub.String(),
			MemberRange: netip.PrefixFrom(sub.Addr(), 28).String(), Labels: labels,
		})
		if err == nil {
			return n, sub
		}
		if !errors.Is(err, container.ErrAddressInUse) {
			x.Fatalf("create a network on %s: %v", sub, err)
		}
	}
	x.Fatal("no free /27 in 10.214.0.0/16")
	return nil, netip.Prefix{}
}

// testDescribe: the engine describes itself, and says its memory or that
// it cannot.
func testDescribe(x *env) {
	if d, err := x.e.Check(x.ctx); err != nil || d == "" {
		x.Errorf("check = %q, %v", d, err)
	}
	if m, err := x.e.MemoryBytes(x.ctx); err != nil && !container.IsNotSupported(err) || m < 0 {
		x.Errorf("memory = %d, %v", m, err)
	}
	if a := x.e.Abilities(); a.Kind == "" {
		x.Errorf("abilities name no kind: %+v", a)
	}
}
