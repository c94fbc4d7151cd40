package netcmd

import (
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/netlog"
)

// TestNetRowsNameWhyAnAllowedHostFailed: an allowed host whose
// connections failed says how many and why, in short, beside what it was
// denied.
func TestNetRowsNameWhyAnAllowedHostFailed(t *testing.T) {
	rows := netRows(netlog.Summary{Hosts: []netlog.HostSummary{
		{Host: "api.example.com", Port: 443, Allowed: 3, Errors: 2, Error: "dial tcp 10.0.0.5:443: connect: connection refused"},
		{Host: "tls.example.com", Port: 443, Allowed: 1, Errors: 1, Error: "tls: failed to verify certificate: x509: certificate signed by unknown authority"},
		{Host: "both.example.com", Port: 443, Allowed: 1, Errors: 1, Denied: 1, Reason: "not in the allow list", Error: "i/o timeout"},
		{Host: "ok.example.com", Port: 443, Allowed: 1},
	}})
	want := []string{
		"2 failed: connection refused",
		"1 failed: TLS error: certificate signed by unknown authority",
		"not in the allow list; 1 failed: timed out",
		"",
	}
	for i, w := range want {
		if got := rows[i+1][6]; got != w {
			t.Errorf("%s: REASON %q, want %q", rows[i+1][0], got, w)
		}
	}
}
