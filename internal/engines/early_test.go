package engines

import (
	"context"
	"errors"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
)

// The early connection answers the environment's engine ("") once, and
// every other name goes to the fallback.
func TestEarlyAnswersTheEnvironmentsEngine(t *testing.T) {
	env := enginefake.New("img")
	calls := 0
	Override = func(_ context.Context, name string) (container.Engine, error) {
		calls++
		if name != "" {
			t.Errorf("the early connection asked for %q", name)
		}
		return env, nil
	}
	t.Cleanup(func() { Override = nil })
	other := errors.New("other engine")
	connect := ConnectEarly(context.Background()).Connector(func(_ context.Context, name string) (container.Engine, error) {
		if name != "far" {
			t.Errorf("the fallback was asked for %q", name)
		}
		return nil, other
	})
	for range 2 {
		if got, err := connect(context.Background(), ""); err != nil || got != env {
			t.Errorf("the environment's engine: %v, %v", got, err)
		}
	}
	if _, err := connect(context.Background(), "far"); !errors.Is(err, other) {
		t.Errorf("another engine: %v, want the fallback's answer", err)
	}
	if calls != 1 {
		t.Errorf("connected %d times, want once", calls)
	}
}
