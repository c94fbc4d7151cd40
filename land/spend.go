package land

import (
	"github.com/git-sandbox/git-sandbox/internal/network"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// meteredUsage is the Sandbox-Usage trailer from what the credential
// broker metered of the sandbox's model calls ("182k in, 21k out,
// $1.43"), when it metered any: the APIs' own figures, in place of what
// the agent reported. A sandbox that cannot name its decision log (beside
// which the usage log is) has none.
func meteredUsage(sb Sandbox, rec *record.Record) (string, bool) {
	nl, ok := sb.(interface{ NetLog() string })
	if !ok {
		return "", false
	}
	st := network.SpendOf(rec, nl.NetLog())
	if !st.Metered || st.Spent == nil || st.Spent.Requests == 0 {
		return "", false
	}
	return st.Spent.Trailer(), true
}
