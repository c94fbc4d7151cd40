package mcp

import (
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// checkBudget refuses a sandbox_start budget above the user's own
// budget.model: the agent handing work out may tighten what a sandbox
// spends, never loosen it.
func (s *Server) checkBudget(asked string) error {
	if asked == "" {
		return nil
	}
	usd, err := meter.ParseDollars(asked)
	if err != nil {
		return usererr.New("budget: %v", err)
	}
	own, err := s.env.Config.ModelBudget()
	if err != nil {
		return err
	}
	if own.USD > 0 && usd > own.USD {
		return usererr.New("budget %s is above the user's budget.model (%s): sandbox_start may only lower it", meter.Dollars(usd), meter.Dollars(own.USD)).
			Hint("the user raises it in %s, or with git sandbox budget BRANCH on a sandbox", config.UserPath())
	}
	return nil
}
