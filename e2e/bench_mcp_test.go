package e2e

import (
	"testing"
	"time"
)

// BenchmarkMCPList: sandbox_list over git sandbox mcp (a client's session
// already open, as a lead agent keeps it) with 20 sandboxes, against the
// command it answers like, `git sandbox ps --json`, on the same sandboxes.
func BenchmarkMCPList(b *testing.B) {
	e := forecastFleet(b)
	e.mcpConfig(false)
	c, err := e.mcpConnect(b)
	if err != nil {
		b.Fatal(err)
	}
	c.mustCall("sandbox_list", nil) // the forecast cache, as ps warms it
	e.MustSandbox("ps", "--json")
	var ours, raw []time.Duration
	for round := 0; round < benchRounds; round++ {
		ours = append(ours, timeIt(b, func() { c.mustCall("sandbox_list", nil) }))
		raw = append(raw, timeIt(b, func() { e.MustSandbox("ps", "--json") }))
	}
	report(b, "mcp sandbox_list, 20 sandboxes", median(ours), median(raw), 1.5)
}
