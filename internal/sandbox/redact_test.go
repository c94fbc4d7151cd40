package sandbox

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
)

func TestPlanRedacted(t *testing.T) {
	env := []string{"HOME=/home/sandbox", "GIT_SANDBOX_BRANCH=t1", "IS_SANDBOX=1", "TOKEN=hunter2", "FOO=bar=baz", "EMPTY="}
	p := &Plan{Branch: "t1", Container: &container.Spec{Env: slices.Clone(env)}, passed: envNames([]string{"TOKEN=hunter2", "FOO=bar=baz", "EMPTY="})}
	r := p.Redacted()
	want := []string{"HOME=/home/sandbox", "GIT_SANDBOX_BRANCH=t1", "IS_SANDBOX=1", "TOKEN=" + Redacted, "FOO=" + Redacted, "EMPTY=" + Redacted}
	if !slices.Equal(r.Container.Env, want) {
		t.Errorf("redacted env = %q, want %q", r.Container.Env, want)
	}
	if !slices.Equal(p.Container.Env, env) {
		t.Errorf("Redacted changed the plan the container is made from: %q", p.Container.Env)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "bar=baz"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the JSON of a redacted plan holds %q: %s", secret, b)
		}
	}
	if (*Plan)(nil).Redacted() != nil {
		t.Error("nil plan")
	}
}
