package mcp

import (
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
)

// sandbox_start may lower the user's budget, never raise it.
func TestStartBudgetMayOnlyLower(t *testing.T) {
	l := &config.Loaded{Config: config.Defaults()}
	l.Budget.Model = "5.00"
	s := &Server{env: &sandbox.Env{Config: l}}
	if err := s.checkBudget("2.00"); err != nil {
		t.Errorf("lowering: %v", err)
	}
	if err := s.checkBudget("50.00"); err == nil || !strings.Contains(err.Error(), "above the user's budget.model ($5.00)") {
		t.Errorf("raising: %v", err)
	}
	if err := s.checkBudget("lots"); err == nil {
		t.Error("lots is a budget")
	}
	l.Budget.Model = ""
	if err := s.checkBudget("50.00"); err != nil {
		t.Errorf("without a budget of the user's: %v", err)
	}
}
