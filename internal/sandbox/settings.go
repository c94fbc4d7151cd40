package sandbox

import (
	"github.com/git-sandbox/git-sandbox/internal/agentrepo"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/verify"
)

// RunSettings are what a new container of the sandbox (verify) runs with:
// the stricter of the current configuration and what the sandbox started
// with.
func (s *Sandbox) RunSettings() (verify.RunSettings, error) {
	cur, err := verify.ConfigSettings(s.env.Config)
	if err != nil {
		return verify.RunSettings{}, err
	}
	return cur.Stricter(s.Record), nil
}

// syncBudget is the configured budget of one sync.
func (e *Env) syncBudget() (agentrepo.Budget, error) {
	obj, err := config.MemoryBytes(e.Config.Budget.SyncObject)
	if err != nil {
		return agentrepo.Budget{}, err
	}
	total, err := config.MemoryBytes(e.Config.Budget.Sync)
	if err != nil {
		return agentrepo.Budget{}, err
	}
	return agentrepo.Budget{MaxObject: obj, MaxTotal: total, ObjectSetting: "budget.sync_object", TotalSetting: "budget.sync"}, nil
}
