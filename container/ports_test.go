package container

import (
	"strings"
	"testing"
)

func TestParsePublish(t *testing.T) {
	for in, want := range map[string]Port{
		"3000":         {HostIP: Loopback, Port: 3000},
		"8080:3000":    {HostIP: Loopback, HostPort: 8080, Port: 3000},
		"3000/tcp":     {HostIP: Loopback, Port: 3000},
		"65535:65535":  {HostIP: Loopback, HostPort: 65535, Port: 65535},
		"0.0.0.0:8:80": {},
		"":             {},
		"0":            {},
		"70000":        {},
		"x:3000":       {},
		"3000:":        {},
		"3000/udp":     {},
	} {
		got, err := ParsePublish(in)
		if want == (Port{}) {
			if err == nil {
				t.Errorf("%q: %+v, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", in, got, err, want)
		}
	}
}

func TestSpecPublishesOnLoopbackOnly(t *testing.T) {
	s := &Spec{User: "1:1", Limits: Limits{Pids: 1}, Network: NetworkOpen,
		Ports: []Port{{HostIP: Loopback, HostPort: 41000, Port: 3000}, {HostIP: Loopback, Port: 5000}}}
	s.Harden()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if PortsLabel(s.Ports) != "127.0.0.1:41000->3000,127.0.0.1:auto->5000" {
		t.Errorf("label %q", PortsLabel(s.Ports))
	}
	s.Ports[0].HostIP = "0.0.0.0"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "127.0.0.1 only") {
		t.Errorf("all interfaces: %v", err)
	}
}
