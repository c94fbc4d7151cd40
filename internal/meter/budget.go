package meter

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Budget is what a sandbox may spend on model calls: dollars, tokens, or
// both (zero: no bound).
type Budget struct {
	USD    float64 `json:"usd,omitempty"`
	Tokens int64   `json:"tokens,omitempty"`
}

// IsZero reports a budget that bounds nothing.
func (b Budget) IsZero() bool { return b.USD <= 0 && b.Tokens <= 0 }

// String writes the budget as "$5.00", "2.0M tokens" or both.
func (b Budget) String() string {
	var parts []string
	if b.USD > 0 {
		parts = append(parts, Dollars(b.USD))
	}
	if b.Tokens > 0 {
		parts = append(parts, Short(b.Tokens)+" tokens")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " and ")
}

// Spent is what a usage log adds up to.
type Spent struct {
	USD      float64 `json:"cost_usd"`
	Usage    Usage   `json:"usage"`
	Requests int     `json:"requests"`
	// Unknown counts requests whose usage is not known in full; Unpriced
	// those of models without a price (counted in tokens only); Refused
	// those the budget refused.
	Unknown  int `json:"unknown,omitempty"`
	Unpriced int `json:"unpriced,omitempty"`
	Refused  int `json:"refused,omitempty"`
}

func (s *Spent) add(r *Record) {
	s.Requests++
	s.USD += r.CostUSD
	s.Usage = s.Usage.Add(r.Usage)
	switch {
	case r.Refused != "":
		s.Refused++
	case r.Unknown:
		s.Unknown++
	}
	if r.Unpriced {
		s.Unpriced++
	}
}

// Fraction is how much of b is spent (the larger of dollars and tokens);
// 0 without a budget.
func (b Budget) Fraction(s Spent) float64 {
	f := 0.0
	if b.USD > 0 {
		f = s.USD / b.USD
	}
	if b.Tokens > 0 {
		f = math.Max(f, float64(s.Usage.Tokens())/float64(b.Tokens))
	}
	return f
}

// SpentBy says how the budget is spent by s, "" when it is not.
func (b Budget) SpentBy(s Spent) string {
	switch {
	case b.USD > 0 && s.USD >= b.USD:
		return fmt.Sprintf("the sandbox's budget of %s is spent (%s so far)", Dollars(b.USD), Dollars(s.USD))
	case b.Tokens > 0 && s.Usage.Tokens() >= b.Tokens:
		return fmt.Sprintf("the sandbox's budget of %s tokens is spent (%s so far)", Short(b.Tokens), Short(s.Usage.Tokens()))
	}
	return ""
}

// ParseDollars reads an amount such as "5", "5.00" or "$5.00".
func ParseDollars(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(s), "$"), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not an amount of dollars such as 5.00", s)
	}
	return v, nil
}

// ParseTokens reads a number of tokens such as "2000000", "500k" or
// "2.5M" (k: thousand, M: million).
func ParseTokens(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "k") || strings.HasSuffix(t, "K"):
		mult = 1e3
	case strings.HasSuffix(t, "m") || strings.HasSuffix(t, "M"):
		mult = 1e6
	}
	if mult > 1 {
		t = t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	n := math.Round(v * mult)
	if err != nil || t == "" || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || n > math.MaxInt64/2 || (mult == 1 && n != v) {
		return 0, fmt.Errorf("%q is not a number of tokens such as 2000000, 500k or 2.5M", s)
	}
	return int64(n), nil
}

// Change applies dollars and tokens to b: "+X" raises that bound by X, "X"
// sets it to X (0 takes the bound away); an empty one leaves it.
func (b Budget) Change(dollars, tokens string) (Budget, error) {
	if dollars != "" {
		v, add := strings.CutPrefix(strings.TrimSpace(dollars), "+")
		usd, err := ParseDollars(v)
		if err != nil {
			return b, err
		}
		if add {
			usd += b.USD
		}
		b.USD = usd
	}
	if tokens != "" {
		v, add := strings.CutPrefix(strings.TrimSpace(tokens), "+")
		n, err := ParseTokens(v)
		if err != nil {
			return b, err
		}
		if add && b.Tokens > 0 {
			if n > math.MaxInt64-b.Tokens {
				return b, fmt.Errorf("%q raises the budget past any number of tokens", tokens)
			}
			n += b.Tokens
		}
		b.Tokens = n
	}
	return b, nil
}

// writeRefusal answers a model request past the budget as the API itself
// says "no more": status 429 and the vendor's error shape, which the
// agent's CLI shows. x-should-retry tells the vendors' SDKs not to try
// again (retrying cannot help until the user raises the budget).
func writeRefusal(w http.ResponseWriter, api API, why string) {
	raise := "+DOLLARS"
	if strings.Contains(why, "tokens") {
		raise = "--tokens +TOKENS"
	}
	msg := "git sandbox: " + why + "; raise it with: git sandbox budget <branch> " + raise
	var v any
	if api == Anthropic {
		v = map[string]any{"type": "error", "error": map[string]any{"type": "rate_limit_error", "message": msg}}
	} else {
		v = map[string]any{"error": map[string]any{"message": msg, "type": "insufficient_quota", "param": nil, "code": "insufficient_quota"}}
	}
	b, _ := json.Marshal(v)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Should-Retry", "false")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(b)
}

// Alert is what the usage log at path says of budget b: "budget-spent",
// "budget-80" (80% of it spent), or "".
func Alert(path string, b Budget) string {
	s, err := SpentIn(path)
	switch f := b.Fraction(s); {
	case err != nil || b.IsZero():
		return ""
	case f >= 1:
		return "budget-spent"
	case f >= 0.8:
		return "budget-80"
	}
	return ""
}
