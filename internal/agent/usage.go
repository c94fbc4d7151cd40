package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Usage is what an agent reported spending on its tasks. The numbers come
// from the agent's own output, which the agent controls: they are
// information for the user, parsed as numbers only, never trusted text.
type Usage struct {
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CacheReadTokens     int64   `json:"cache_read_tokens,omitempty"`
	CacheCreationTokens int64   `json:"cache_creation_tokens,omitempty"`
	CostUSD             float64 `json:"cost_usd"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:         u.InputTokens + o.InputTokens,
		OutputTokens:        u.OutputTokens + o.OutputTokens,
		CacheReadTokens:     u.CacheReadTokens + o.CacheReadTokens,
		CacheCreationTokens: u.CacheCreationTokens + o.CacheCreationTokens,
		CostUSD:             u.CostUSD + o.CostUSD,
	}
}

// IsZero reports whether nothing was reported.
func (u Usage) IsZero() bool { return u == Usage{} }

// String is the usage as land's Sandbox-Usage trailer writes it.
func (u Usage) String() string {
	s := fmt.Sprintf("input_tokens=%d output_tokens=%d", u.InputTokens, u.OutputTokens)
	if u.CacheReadTokens > 0 {
		s += fmt.Sprintf(" cache_read_tokens=%d", u.CacheReadTokens)
	}
	if u.CacheCreationTokens > 0 {
		s += fmt.Sprintf(" cache_creation_tokens=%d", u.CacheCreationTokens)
	}
	return s + fmt.Sprintf(" cost_usd=%.4f", u.CostUSD)
}

// UsageReporter is an adapter whose agent reports its usage in its output.
type UsageReporter interface {
	// ParseUsage reads the end of the agent's output (its last lines) and
	// returns the usage of the run, if it reported one.
	ParseUsage(output []byte) (Usage, bool)
}

// ParseUsage asks the adapter called name to read a run's output.
func ParseUsage(name string, output []byte) (Usage, bool) {
	a, ok := adapters[name]
	if !ok {
		return Usage{}, false
	}
	r, ok := a.(UsageReporter)
	if !ok {
		return Usage{}, false
	}
	return r.ParseUsage(output)
}

// claudeResult is the result object of claude -p --output-format json (one
// line) or the last event of stream-json.
type claudeResult struct {
	Type         string   `json:"type"`
	TotalCostUSD *float64 `json:"total_cost_usd"`
	Usage        *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// ParseUsage finds the last result object in Claude Code's JSON output.
func (claude) ParseUsage(output []byte) (Usage, bool) {
	lines := bytes.Split(output, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		line := bytes.TrimSpace(lines[i])
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r claudeResult
		if json.Unmarshal(line, &r) != nil || r.Type != "result" || r.TotalCostUSD == nil {
			continue
		}
		u := Usage{CostUSD: *r.TotalCostUSD}
		if r.Usage != nil {
			u.InputTokens, u.OutputTokens = r.Usage.InputTokens, r.Usage.OutputTokens
			u.CacheReadTokens, u.CacheCreationTokens = r.Usage.CacheReadInputTokens, r.Usage.CacheCreationInputTokens
		}
		if !plausible(u) {
			return Usage{}, false
		}
		return u, true
	}
	return Usage{}, false
}

// plausible refuses numbers no real run reports (negative, not finite),
// which only a confused or hostile agent prints.
func plausible(u Usage) bool {
	if math.IsNaN(u.CostUSD) || math.IsInf(u.CostUSD, 0) || u.CostUSD < 0 || u.CostUSD > 1e6 {
		return false
	}
	for _, n := range []int64{u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheCreationTokens} {
		if n < 0 || n > 1e12 {
			return false
		}
	}
	return true
}

// hasFlag reports whether args set a --flag (as "--flag" or "--flag=…").
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}
