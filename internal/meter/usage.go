package meter

import (
	"fmt"
)

// Usage is the tokens of one request, or of many added up. Input excludes
// the cached input (CacheRead) and what was written to the cache
// (CacheWrite), as Anthropic counts; OpenAI's figures are brought to the
// same terms. Reasoning is part of Output, noted apart.
type Usage struct {
	Input      int64 `json:"input_tokens"`
	Output     int64 `json:"output_tokens"`
	CacheWrite int64 `json:"cache_write_tokens,omitempty"`
	CacheRead  int64 `json:"cache_read_tokens,omitempty"`
	Reasoning  int64 `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		Input: u.Input + o.Input, Output: u.Output + o.Output,
		CacheWrite: u.CacheWrite + o.CacheWrite, CacheRead: u.CacheRead + o.CacheRead,
		Reasoning: u.Reasoning + o.Reasoning,
	}
}

// Tokens is every token billed: input, output and cache.
func (u Usage) Tokens() int64 { return u.Input + u.Output + u.CacheWrite + u.CacheRead }

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool { return u == Usage{} }

// Short writes a count of tokens as 182k or 1.2M.
func Short(n int64) string {
	switch {
	case n >= 10_000_000:
		return fmt.Sprintf("%dM", (n+500_000)/1_000_000)
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", (n+500)/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%d", n)
}

// Dollars writes an amount as $1.43.
func Dollars(usd float64) string { return fmt.Sprintf("$%.2f", usd) }
