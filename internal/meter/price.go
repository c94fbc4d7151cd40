package meter

import (
	"fmt"
	"path"
)

// Price is what a model costs, in dollars per million tokens. Model is a
// name or a pattern with * (path.Match), such as "claude-sonnet-4*".
type Price struct {
	Model      string  `json:"model" toml:"model"`
	Input      float64 `json:"input" toml:"input"`
	Output     float64 `json:"output" toml:"output"`
	CacheWrite float64 `json:"cache_write,omitempty" toml:"cache_write"`
	CacheRead  float64 `json:"cache_read,omitempty" toml:"cache_read"`
}

// BuiltinPrices are the list prices of the models the adapters use (USD
// per million tokens), the more specific patterns first. The user's
// [[price]] tables come before them.
var BuiltinPrices = []Price{
	{Model: "claude-opus-4-5*", Input: 5, Output: 25, CacheWrite: 6.25, CacheRead: 0.50},
	{Model: "claude-opus-4*", Input: 15, Output: 75, CacheWrite: 18.75, CacheRead: 1.50},
	{Model: "claude-sonnet-4*", Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30},
	{Model: "claude-3-7-sonnet*", Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30},
	{Model: "claude-haiku-4-5*", Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.10},
	{Model: "claude-3-5-haiku*", Input: 0.80, Output: 4, CacheWrite: 1, CacheRead: 0.08},
	{Model: "gpt-5-mini*", Input: 0.25, Output: 2, CacheRead: 0.025},
	{Model: "gpt-5-nano*", Input: 0.05, Output: 0.40, CacheRead: 0.005},
	{Model: "gpt-5*", Input: 1.25, Output: 10, CacheRead: 0.125},
	{Model: "gpt-4.1-mini*", Input: 0.40, Output: 1.60, CacheRead: 0.10},
	{Model: "gpt-4.1*", Input: 2, Output: 8, CacheRead: 0.50},
	{Model: "o4-mini*", Input: 1.10, Output: 4.40, CacheRead: 0.275},
	{Model: "codex-mini*", Input: 1.50, Output: 6, CacheRead: 0.375},
}

// Prices is a price list, looked up in order.
type Prices []Price

// WithBuiltin is the user's prices, then the built-in ones.
func WithBuiltin(user []Price) Prices {
	return append(append(Prices{}, user...), BuiltinPrices...)
}

// Lookup returns the first price whose model matches model.
func (ps Prices) Lookup(model string) (Price, bool) {
	for _, p := range ps {
		if ok, _ := path.Match(p.Model, model); ok {
			return p, true
		}
	}
	return Price{}, false
}

// Cost is what u costs at p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.Input)*p.Input + float64(u.Output)*p.Output +
		float64(u.CacheWrite)*p.CacheWrite + float64(u.CacheRead)*p.CacheRead) / 1e6
}

// Check refuses a price that cannot be used.
func (p Price) Check() error {
	if p.Model == "" {
		return fmt.Errorf("a [[price]] has no model")
	}
	if _, err := path.Match(p.Model, ""); err != nil {
		return fmt.Errorf("[[price]] model %q: %v", p.Model, err)
	}
	for _, v := range []float64{p.Input, p.Output, p.CacheWrite, p.CacheRead} {
		if v < 0 {
			return fmt.Errorf("[[price]] model %q: a price is negative", p.Model)
		}
	}
	return nil
}
