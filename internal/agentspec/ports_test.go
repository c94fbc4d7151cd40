package agentspec

import (
	"strconv"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/network"
)

func TestPorts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		publish []string
		forward []int
		mode    container.NetworkMode
		dry     bool
		want    string // "PORT->HOST" joined, "" none; "!msg" an error
	}{
		{"fixed host port", []string{"8080:3000"}, nil, container.NetworkOpen, false, "3000->8080"},
		{"a free port is chosen", []string{"3000"}, nil, container.NetworkOpen, false, "3000->free"},
		{"dry run chooses none", []string{"3000"}, nil, container.NetworkOpen, true, "3000->0"},
		{"forwardPorts join", []string{"3000"}, []int{3000, 5000}, container.NetworkOpen, true, "3000->0 5000->0"},
		{"forwardPorts alone in allowlist mode", nil, []int{5000}, container.NetworkAllowlist, false, "5000->free"},
		{"publish in allowlist mode", []string{"3000"}, []int{5000}, container.NetworkAllowlist, false, "3000->free 5000->free"},
		{"forwardPorts alone with no network", nil, []int{5000}, container.NetworkNone, false, ""},
		{"publish needs a network", []string{"3000"}, nil, container.NetworkNone, false, "!needs a network"},
		{"twice", []string{"3000", "8080:3000"}, nil, container.NetworkOpen, false, "!published twice"},
		{"a host port twice", []string{"8080:3000", "8080:3001"}, nil, container.NetworkOpen, false, "!used twice"},
		{"not a port", []string{"x"}, nil, container.NetworkOpen, false, "!--publish"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports, err := Ports(tc.publish, tc.forward, tc.mode, tc.dry)
			if strings.HasPrefix(tc.want, "!") {
				if err == nil || !strings.Contains(err.Error(), tc.want[1:]) {
					t.Fatalf("err %v, want %q", err, tc.want[1:])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ports {
				if p.HostIP != container.Loopback {
					t.Errorf("port %v not on the loopback interface", p)
				}
				host := strconv.Itoa(p.HostPort)
				if p.HostPort > 0 && !strings.Contains(strings.Join(tc.publish, " "), ":") {
					host = "free"
				}
				got = append(got, strconv.Itoa(p.Port)+"->"+host)
			}
			if s := strings.Join(got, " "); s != tc.want {
				t.Errorf("ports %q, want %q", s, tc.want)
			}
		})
	}
}

// In allowlist mode the engine publishes nothing of the agent's container
// (its network is internal): the ports are the proxy's to publish, and
// the agent answers to the name the proxy forwards to.
func TestBuildPortsByMode(t *testing.T) {
	ports := []container.Port{{HostIP: container.Loopback, HostPort: 8080, Port: 3000}}
	for _, tc := range []struct {
		mode                  container.NetworkMode
		network, alias, label string
		published             int
	}{
		{container.NetworkOpen, "n-open", "", "127.0.0.1:8080->3000", 1},
		{container.NetworkAllowlist, "n-net", network.AgentAlias, "127.0.0.1:8080->3000", 0},
	} {
		in := planInput(t)
		in.Network, in.NetworkName, in.Ports = tc.mode, tc.network, ports
		spec, err := Build(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(spec.Ports) != tc.published || spec.NetworkAlias != tc.alias || spec.Labels[container.LabelPorts] != tc.label {
			t.Errorf("%s: ports %v alias %q label %q", tc.mode, spec.Ports, spec.NetworkAlias, spec.Labels[container.LabelPorts])
		}
	}
	// No ports, no alias.
	in := planInput(t)
	in.Network, in.NetworkName = container.NetworkAllowlist, "n-net"
	if spec, err := Build(in); err != nil || spec.NetworkAlias != "" || len(spec.Ports) != 0 {
		t.Errorf("no ports: %v %+v", err, spec)
	}
}
