package engines

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/ui"
)

// sized is a fake engine that reports its machine's memory.
type sized struct {
	*fake.Engine
	mem int64
}

func (s sized) MemoryBytes(context.Context) (int64, error) { return s.mem, nil }

// placer places on the named engines (a connect to any other name fails).
func placer(cfg *config.Loaded, engines map[string]container.Engine) Placer {
	return Placer{Config: cfg, UI: ui.Discard(), Connect: func(_ context.Context, name string) (container.Engine, error) {
		if d, ok := engines[name]; ok {
			return d, nil
		}
		return nil, errors.New("connection refused")
	}}
}

// agentOn puts a running sandbox container with a memory limit on d.
func agentOn(t *testing.T, d container.Engine, name string, mem int64) {
	t.Helper()
	spec := &container.Spec{Name: name, Image: "img", User: "1000:1000", Network: container.NetworkNone, Labels: map[string]string{
		container.LabelManaged: "1", container.LabelRole: container.RoleAgent, container.LabelMemory: strconv.FormatInt(mem, 10),
	}, Limits: container.Limits{Pids: 10}}
	spec.Harden()
	if _, err := d.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
}

func TestChoose(t *testing.T) {
	ctx := context.Background()
	a := sized{fake.New("img"), 8 << 30}
	b := sized{fake.New("img"), 4 << 30}
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.Engines = []config.Engine{{Name: "a", Host: "unix:///a.sock"}, {Name: "b", Host: "unix:///b.sock", MaxSandboxes: 1}}
	p := placer(cfg, map[string]container.Engine{"a": a, "b": b})

	// Nothing asked, no default: the environment's engine.
	if got, err := p.Choose(ctx, ""); got != "" || err != nil {
		t.Errorf("no engine asked: %q %v", got, err)
	}
	// A name: that engine, while it has room.
	if got, err := p.Choose(ctx, "b"); got != "b" || err != nil {
		t.Errorf("engine b: %q %v", got, err)
	}
	agentOn(t, b, "one", 1<<30)
	if _, err := p.Choose(ctx, "b"); err == nil || !strings.Contains(err.Error(), "max_sandboxes") {
		t.Errorf("a full engine: %v", err)
	}
	if _, err := p.Choose(ctx, "nowhere"); err == nil {
		t.Error("an engine the config does not name was chosen")
	}
	// auto: the most memory left among those with room (b is full).
	agentOn(t, a, "big", 6<<30)
	if got, err := p.Choose(ctx, config.EngineAuto); got != "a" || err != nil {
		t.Errorf("auto: %q %v", got, err)
	}
	// default_engine stands for the flag.
	cfg.DefaultEngine = "a"
	if got, err := p.Choose(ctx, ""); got != "a" || err != nil {
		t.Errorf("default_engine: %q %v", got, err)
	}
}

func TestChooseAutoSaysWhyNoneFits(t *testing.T) {
	ctx := context.Background()
	cfg := &config.Loaded{Config: config.Defaults()}
	if _, err := placer(cfg, nil).Choose(ctx, config.EngineAuto); err == nil || !strings.Contains(err.Error(), "needs engines") {
		t.Errorf("auto without engines: %v", err)
	}
	cfg.Engines = []config.Engine{{Name: "gone", Host: "unix:///gone.sock"}, {Name: "tiny", Host: "unix:///t.sock"}}
	p := placer(cfg, map[string]container.Engine{"tiny": fake.New()})
	_, err := p.Choose(ctx, config.EngineAuto)
	if err == nil || !strings.Contains(err.Error(), "no configured engine can take a sandbox") {
		t.Fatalf("auto with no engine that answers with its size: %v", err)
	}
}

// Ship does nothing for the environment's engine, an engine that has the
// image, or a local engine that lacks it.
func TestShipLeavesAloneWhatNeedsNoCopy(t *testing.T) {
	ctx := context.Background()
	cfg := &config.Loaded{Config: config.Defaults()}
	local, remote := fake.New("img"), fake.New()
	p := placer(cfg, map[string]container.Engine{"": local, "r": remote})
	for _, c := range []struct{ engine, image string }{{"", "img"}, {"r", "other"}} {
		if err := p.Ship(ctx, remote, c.engine, c.image); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	has := fake.New("img")
	if err := p.Ship(ctx, has, "r", "img"); err != nil {
		t.Errorf("engine with the image: %v", err)
	}
}
