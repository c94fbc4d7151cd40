package egress

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseEntry(t *testing.T) {
	good := []struct {
		in, canon string
		host      string
		wildcard  bool
		addr      string
		port      uint16
	}{
		{"api.anthropic.com", "api.anthropic.com", "api.anthropic.com", false, "", 0},
		{"  API.Anthropic.COM. ", "api.anthropic.com", "api.anthropic.com", false, "", 0},
		{"*.githubusercontent.com", "*.githubusercontent.com", "githubusercontent.com", true, "", 0},
		{"proxy.golang.org:443", "proxy.golang.org:443", "proxy.golang.org", false, "", 443},
		{"*.example.com:8443", "*.example.com:8443", "example.com", true, "", 8443},
		{"registry", "registry", "registry", false, "", 0},
		{"host.docker.internal:8080", "host.docker.internal:8080", "host.docker.internal", false, "", 8080},
		{"_srv.example.com", "_srv.example.com", "_srv.example.com", false, "", 0},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", "xn--bcher-kva.example", false, "", 0},
		{"192.0.2.7", "192.0.2.7", "", false, "192.0.2.7", 0},
		{"10.1.2.3:5432", "10.1.2.3:5432", "", false, "10.1.2.3", 5432},
		{"2001:db8::7", "2001:db8::7", "", false, "2001:db8::7", 0},
		{"[2001:DB8::7]", "2001:db8::7", "", false, "2001:db8::7", 0},
		{"[2001:db8::7]:443", "[2001:db8::7]:443", "", false, "2001:db8::7", 443},
		{"::ffff:10.0.0.1", "10.0.0.1", "", false, "10.0.0.1", 0},
	}
	for _, tc := range good {
		e, err := ParseEntry(tc.in, FromUser)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		var addr netip.Addr
		if tc.addr != "" {
			addr = netip.MustParseAddr(tc.addr)
		}
		if e.Host != tc.host || e.Wildcard != tc.wildcard || e.Addr != addr || e.Port != tc.port || e.Source != FromUser {
			t.Errorf("%q: got %+v", tc.in, e)
		}
		if e.String() != tc.canon {
			t.Errorf("%q: String() = %q, want %q", tc.in, e.String(), tc.canon)
		}
		if again, err := ParseEntry(e.String(), FromUser); err != nil || !reflect.DeepEqual(again, e) {
			t.Errorf("%q: does not read back: %+v %v", tc.in, again, err)
		}
	}

	bad := []struct{ in, why string }{
		{"", "empty"},
		{"https://api.example.com", "without a scheme"},
		{"api.example.com/v1", "without a path"},
		{"user@example.com", "no user name"},
		{"exa mple.com", "not a host name"},
		{"*", "wildcard"},
		{"*.com", "below a top-level domain"},
		{"a.*.example.com", "wildcard"},
		{"*example.com", "wildcard"},
		{"example.com:0", "port"},
		{"example.com:65536", "port"},
		{"example.com:http", "port"},
		{"example.com:", "empty port"},
		{"2001:db8::7:443x", "[address]:port"},
		{"[2001:db8::7", "missing ]"},
		{"[example.com]:443", "IPv6"},
		{"fe80::1%eth0", "not a host name"},
		{"-bad.example.com", "starts or ends with -"},
		{"a..b", "empty label"},
		{"ex!ample.com", "not allowed in a host name"},
		{"bücher.example", "xn--"},
		{"127.1", "unusual form"},
		{"2130706433", "unusual form"},
		{strings.Repeat("a", 64) + ".com", "longer than 63"},
	}
	for _, tc := range bad {
		_, err := ParseEntry(tc.in, FromUser)
		if err == nil {
			t.Errorf("%q: accepted", tc.in)
			continue
		}
		if !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "allow entry") {
			t.Errorf("%q: error %q does not say %q", tc.in, err, tc.why)
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind Kind
		want string
	}{
		{"Example.COM", HTTP, "example.com:80"},
		{"example.com.", Connect, "example.com:443"},
		{"example.com:8080", HTTP, "example.com:8080"},
		{"[::1]:443", Connect, "[::1]:443"},
		{"[::ffff:127.0.0.1]:443", Connect, "127.0.0.1:443"},
		{"10.0.0.1", HTTP, "10.0.0.1:80"},
	} {
		got, err := ParseTarget(tc.in, tc.kind)
		if err != nil || got.String() != tc.want {
			t.Errorf("%q: %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"example.com:0", "example.com:x", "exa mple.com", "0x7f.1", "127.1:80", ""} {
		if _, err := ParseTarget(in, Connect); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}

func target(t *testing.T, s string, kind Kind) Target {
	t.Helper()
	tg, err := ParseTarget(s, kind)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func TestPolicyCheck(t *testing.T) {
	p := &Policy{
		Allow: append(MustParseEntries(FromUser,
			"api.example.com", "*.cdn.example.net", "git.example.org:8443", "192.0.2.7", "[2001:db8::7]:22"),
			MustParseEntries(AdapterSource("claude"), "statsig.example.com", "blocked.example.com")...),
		Remove: MustParseEntries(FromRepository, "blocked.example.com", "*.evil.cdn.example.net", "api.example.com:80"),
	}
	for _, tc := range []struct {
		target string
		kind   Kind
		entry  string // "" when denied
		reason string
	}{
		{"api.example.com", Connect, "api.example.com", ""},
		{"api.example.com:443", Connect, "api.example.com", ""},
		{"api.example.com:80", HTTP, "", "removed by repository (api.example.com:80)"},
		{"api.example.com:443", HTTP, "", "not in the allow list"},
		{"api.example.com:8443", Connect, "", "not in the allow list"},
		{"API.EXAMPLE.COM.", Connect, "api.example.com", ""},
		{"x.api.example.com", Connect, "", "not in the allow list"},
		{"example.com", Connect, "", "not in the allow list"},
		{"a.cdn.example.net", Connect, "*.cdn.example.net", ""},
		{"a.b.cdn.example.net", HTTP, "*.cdn.example.net", ""},
		{"cdn.example.net", Connect, "", "not in the allow list"},
		{"xcdn.example.net", Connect, "", "not in the allow list"},
		{"x.evil.cdn.example.net", Connect, "", "removed by repository"},
		{"git.example.org:8443", Connect, "git.example.org:8443", ""},
		{"git.example.org:8443", HTTP, "git.example.org:8443", ""},
		{"git.example.org", Connect, "", "not in the allow list"},
		{"192.0.2.7", Connect, "192.0.2.7", ""},
		{"192.0.2.8", Connect, "", "IP address not in the allow list"},
		{"[2001:db8::7]:22", Connect, "[2001:db8::7]:22", ""},
		{"[::ffff:192.0.2.7]:443", Connect, "192.0.2.7", ""},
		{"statsig.example.com", Connect, "statsig.example.com", ""},
		{"blocked.example.com", Connect, "", "removed by repository (blocked.example.com)"},
	} {
		d, err := p.Check(target(t, tc.target, tc.kind), tc.kind)
		if tc.entry != "" {
			if err != nil || d.Entry.String() != tc.entry {
				t.Errorf("%s %s: %v %v, want %s", tc.kind, tc.target, d.Entry, err, tc.entry)
			}
			continue
		}
		var de *DeniedError
		if !errors.As(err, &de) || !strings.Contains(de.Reason, tc.reason) {
			t.Errorf("%s %s: %v, want a denial saying %q", tc.kind, tc.target, err, tc.reason)
		}
	}
}

func TestPolicyPrefersExactEntry(t *testing.T) {
	p := &Policy{Allow: MustParseEntries(FromUser, "*.corp.example", "registry.corp.example")}
	d, err := p.Check(target(t, "registry.corp.example", Connect), Connect)
	if err != nil || d.Entry.Wildcard {
		t.Fatalf("%+v %v", d, err)
	}
}

// The resolver refusal table: which resolved addresses each kind of entry
// may reach.
func TestPolicyVet(t *testing.T) {
	p := &Policy{
		Allow: MustParseEntries(FromUser,
			"*.example.com", "exact.example.org", "db.corp.example", "host.docker.internal",
			"169.254.169.254:80", "127.0.0.1:8080", "10.9.9.9"),
		Remove:    MustParseEntries(FromRepository, "203.0.113.66"),
		HostAddrs: []netip.Addr{netip.MustParseAddr("172.17.0.1"), netip.MustParseAddr("198.51.100.20")},
	}
	for _, tc := range []struct {
		target string
		kind   Kind
		addr   string
		ok     bool
		class  string
	}{
		// A wildcard reaches public addresses only.
		{"a.example.com", Connect, "93.184.216.34", true, ""},
		{"a.example.com", Connect, "2606:2800:220:1::1", true, ""},
		{"a.example.com", Connect, "127.0.0.1", false, "local"},
		{"a.example.com", Connect, "127.8.9.10", false, "local"},
		{"a.example.com", Connect, "::1", false, "local"},
		{"a.example.com", Connect, "10.0.0.1", false, "private"},
		{"a.example.com", Connect, "172.16.0.1", false, "private"},
		{"a.example.com", Connect, "172.31.255.254", false, "private"},
		{"a.example.com", Connect, "172.32.0.1", true, ""},
		{"a.example.com", Connect, "192.168.1.1", false, "private"},
		{"a.example.com", Connect, "169.254.169.254", false, "local"},
		{"a.example.com", Connect, "169.254.1.1", false, "local"},
		{"a.example.com", Connect, "fd00::1", false, "private"},
		{"a.example.com", Connect, "fc00::1", false, "private"},
		{"a.example.com", Connect, "fe80::1", false, "local"},
		{"a.example.com", Connect, "febf::1", false, "local"},
		{"a.example.com", Connect, "100.64.0.1", false, "private"},
		{"a.example.com", Connect, "100.127.255.254", false, "private"},
		{"a.example.com", Connect, "100.128.0.1", true, ""},
		{"a.example.com", Connect, "0.0.0.0", false, "local"},
		{"a.example.com", Connect, "::", false, "local"},
		{"a.example.com", Connect, "224.0.0.1", false, "local"},
		{"a.example.com", Connect, "ff02::1", false, "local"},
		{"a.example.com", Connect, "255.255.255.255", false, "local"},
		{"a.example.com", Connect, "::ffff:127.0.0.1", false, "local"},
		{"a.example.com", Connect, "::ffff:10.1.1.1", false, "private"},
		{"a.example.com", Connect, "64:ff9b::a9fe:a9fe", false, "local"}, // NAT64 of 169.254.169.254
		{"a.example.com", Connect, "64:ff9b::5db8:d822", true, ""},       // NAT64 of a public address
		{"a.example.com", Connect, "172.17.0.1", false, "Docker host"},
		{"a.example.com", Connect, "198.51.100.20", false, "Docker host"},
		{"a.example.com", Connect, "203.0.113.66", false, "removed"},
		// A wildcard that also has an IP entry for the address.
		{"a.example.com", Connect, "10.9.9.9", true, ""},
		// An exact name reaches private addresses and the Docker host...
		{"exact.example.org", Connect, "93.184.216.34", true, ""},
		{"db.corp.example", Connect, "10.1.2.3", true, ""},
		{"db.corp.example", Connect, "fd12::3", true, ""},
		{"db.corp.example", Connect, "100.64.1.1", true, ""},
		{"host.docker.internal", Connect, "172.17.0.1", true, ""},
		// ...but not local ones: the metadata address and loopback need an
		// IP entry naming them (rebinding an allowed name to them fails).
		{"exact.example.org", Connect, "169.254.169.254", false, "local"},
		{"exact.example.org", Connect, "127.0.0.1", false, "local"},
		{"exact.example.org", HTTP, "169.254.169.254", true, ""}, // 169.254.169.254:80 is listed
		{"exact.example.org", Connect, "::1", false, "local"},
		// IP literals the list names.
		{"169.254.169.254:80", HTTP, "169.254.169.254", true, ""},
		{"127.0.0.1:8080", Connect, "127.0.0.1", true, ""},
	} {
		tg := target(t, tc.target, tc.kind)
		d, err := p.Check(tg, tc.kind)
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		kept, err := p.Vet(d, tg, tc.kind, []netip.Addr{netip.MustParseAddr(tc.addr)})
		if tc.ok {
			if err != nil || len(kept) != 1 {
				t.Errorf("%s -> %s: refused: %v", tc.target, tc.addr, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s -> %s: allowed", tc.target, tc.addr)
			continue
		}
		if !strings.Contains(err.Error(), "("+tc.class+")") {
			t.Errorf("%s -> %s: %v, want class %s", tc.target, tc.addr, err, tc.class)
		}
	}
}

func TestPolicyVetKeepsOnlyVetted(t *testing.T) {
	p := &Policy{Allow: MustParseEntries(FromUser, "*.example.com")}
	tg := target(t, "a.example.com", Connect)
	d, _ := p.Check(tg, Connect)
	kept, err := p.Vet(d, tg, Connect, []netip.Addr{
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("169.254.169.254"),
	})
	if err != nil || len(kept) != 1 || kept[0].String() != "93.184.216.34" {
		t.Fatalf("%v %v", kept, err)
	}
	if _, err := p.Vet(d, tg, Connect, nil); err == nil {
		t.Fatal("no address accepted")
	}
}

func TestPolicyRemoved(t *testing.T) {
	p := &Policy{Remove: MustParseEntries(FromRepository, "*.example.com", "api.other.com", "git.other.com:22", "192.0.2.1")}
	for _, tc := range []struct {
		entry   string
		removed bool
	}{
		{"a.example.com", true},
		{"*.b.example.com", true},
		{"*.example.com", true},
		{"example.com", false},
		{"api.other.com", true},
		{"api.other.com:8443", true},
		{"*.other.com", false},
		{"git.other.com", false},
		{"git.other.com:22", true},
		{"192.0.2.1:443", true},
		{"192.0.2.2", false},
	} {
		e := MustParseEntries(FromUser, tc.entry)[0]
		r, ok := p.Removed(e)
		if ok != tc.removed {
			t.Errorf("%s: removed=%v by %v", tc.entry, ok, r)
		}
		if ok && r.Source != FromRepository {
			t.Errorf("%s: source %q", tc.entry, r.Source)
		}
	}
}
