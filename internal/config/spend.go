package config

import (
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// validateSpend checks the model budget and the prices.
func (l *Loaded) validateSpend(where string) error {
	if _, err := l.ModelBudget(); err != nil {
		return usererr.New("%s: %v", where, err).Hint("give dollars such as budget.model = \"5.00\", tokens such as budget.model_tokens = 2000000")
	}
	for _, p := range l.Prices {
		if err := p.Check(); err != nil {
			return usererr.New("%s: %v", where, err).Hint("a price is dollars per million tokens: [[price]] model = \"claude-sonnet-*\" input = 3.0 output = 15.0")
		}
	}
	return nil
}

// ModelBudget is what each sandbox may spend on model calls, as the
// user's config says (zero: no bound).
func (l *Loaded) ModelBudget() (meter.Budget, error) {
	var b meter.Budget
	if l.Budget.Model != "" {
		v, err := meter.ParseDollars(l.Budget.Model)
		if err != nil {
			return b, usererr.New("budget.model: %v", err)
		}
		b.USD = v
	}
	if l.Budget.ModelTokens < 0 {
		return b, usererr.New("budget.model_tokens = %d: must not be negative", l.Budget.ModelTokens)
	}
	b.Tokens = l.Budget.ModelTokens
	return b, nil
}
