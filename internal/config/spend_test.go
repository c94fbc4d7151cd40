package config

import (
	"strings"
	"testing"
)

func TestSpendIsTheUsersToSet(t *testing.T) {
	user := "[budget]\nmodel = \"5.00\"\nmodel_tokens = 2000000\n\n[[price]]\nmodel = \"claude-sonnet-*\"\ninput = 1.5\noutput = 7.5\n"
	l, err := Load(setup(t, user, ""))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.ModelBudget()
	if err != nil || b.USD != 5 || b.Tokens != 2000000 {
		t.Errorf("budget %+v %v", b, err)
	}
	if len(l.Prices) != 1 || l.Prices[0].Input != 1.5 {
		t.Errorf("prices %+v", l.Prices)
	}
	// A repository can neither price models nor change a budget: not
	// raise it, not lower it, not set one where the user has none.
	for _, repo := range []string{
		"[[price]]\nmodel = \"claude-sonnet-*\"\ninput = 0\noutput = 0\n",
		"[budget]\nmodel = \"500.00\"\n",
		"[budget]\nmodel_tokens = 1\n",
	} {
		if _, err := Load(setup(t, user, repo)); err == nil || !strings.Contains(err.Error(), "may not ask for") {
			t.Errorf("repository %q: %v", repo, err)
		}
	}
	for _, bad := range []string{"[budget]\nmodel = \"lots\"\n", "[budget]\nmodel_tokens = -1\n", "[[price]]\nmodel = \"[\"\ninput = 1\n", "[[price]]\ninput = 1\n"} {
		if _, err := Load(setup(t, bad, "")); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}
