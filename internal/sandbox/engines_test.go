package sandbox

import (
	"context"
	"errors"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/config"
)

// twoEngines gives the test env a second fake engine, configured as "two"
// (bind mode: the fake shares the test's files).
func twoEngines(te *testEnv) *enginefake.Engine {
	two := enginefake.New(config.DefaultImage())
	te.env.Config.Engines = []config.Engine{{Name: "two", Host: "unix:///two.sock", Mode: config.EngineModeBind}}
	te.env.Engines = ConnectorFunc(func(_ context.Context, name string) (Engine, error) {
		switch name {
		case "":
			return te.fake, nil
		case "two":
			return two, nil
		}
		return nil, errors.New("no such engine")
	})
	return two
}

func TestSandboxTalksToItsOwnEngine(t *testing.T) {
	te := newTestEnv(t)
	two := twoEngines(te)
	o := detached("far")
	o.Engine = "two"
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sandbox.Record.Engine != "two" {
		t.Errorf("recorded engine %q, want two", res.Sandbox.Record.Engine)
	}
	if _, err := two.Inspect(context.Background(), res.Sandbox.Container); err != nil {
		t.Errorf("the container is not on engine two: %v", err)
	}
	if _, err := te.fake.Inspect(context.Background(), res.Sandbox.Container); !container.IsNotFound(err) {
		t.Errorf("the container is on the default engine too: %v", err)
	}
	// A later command (a fresh Env) reaches engine two for it.
	sb := te.find("far")
	te.env.Engines = ConnectorFunc(func(_ context.Context, name string) (Engine, error) {
		if name == "two" {
			return two, nil
		}
		return te.fake, nil
	})
	st, err := sb.ContainerState(context.Background())
	if err != nil || st == nil || !st.Running {
		t.Fatalf("state through engine two: %+v %v", st, err)
	}
	if _, err := sb.Stop(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if st, _ := two.Inspect(context.Background(), sb.Container); st == nil || st.Running {
		t.Errorf("stop did not stop the container on engine two: %+v", st)
	}
}

func TestPsListsAnUnreachableEngine(t *testing.T) {
	te := newTestEnv(t)
	twoEngines(te)
	te.start("near")
	o := detached("far")
	o.Engine = "two"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	te.reopen()
	te.env.Config.Engines = []config.Engine{{Name: "two", Host: "unix:///two.sock", Mode: config.EngineModeBind}}
	te.env.Engines = ConnectorFunc(func(_ context.Context, name string) (Engine, error) {
		if name == "two" {
			return nil, errors.New("connection refused")
		}
		return te.fake, nil
	})
	list, err := te.env.Statuses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Status{}
	for _, s := range list {
		got[s.Branch] = s
	}
	if s := got["far"]; s.State != StateUnreachable || s.Engine != "two" || s.EngineError == "" {
		t.Errorf("far: %+v, want unreachable on two with its error", s)
	}
	if s := got["near"]; s.State != StateRunning {
		t.Errorf("near: %+v, want running (its engine answers)", s)
	}
}

func TestStartRefusesAFullEngine(t *testing.T) {
	te := newTestEnv(t)
	twoEngines(te)
	te.env.Config.Engines[0].MaxSandboxes = 1
	o := detached("a")
	o.Engine = "two"
	if _, err := te.env.Start(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	o = detached("b")
	o.Engine = "two"
	if _, err := te.env.Start(context.Background(), o); err == nil {
		t.Fatal("a second sandbox was placed on an engine with max_sandboxes = 1")
	}
	te.assertNothingLeft("b", false)
}

// sized is a fake engine that reports its machine's memory.
type sized struct {
	*enginefake.Engine
	mem int64
}

func (s sized) MemoryBytes(context.Context) (int64, error) { return s.mem, nil }

// engine "auto" picks the engine with the most memory left after the
// limits of the sandboxes already on it.
func TestAutoPlacesOnTheEngineWithTheMostMemoryLeft(t *testing.T) {
	te := newTestEnv(t)
	a := sized{enginefake.New(config.DefaultImage()), 8 << 30}
	b := sized{enginefake.New(config.DefaultImage()), 4 << 30}
	te.env.Config.Engines = []config.Engine{
		{Name: "a", Host: "unix:///a.sock", Mode: config.EngineModeBind},
		{Name: "b", Host: "unix:///b.sock", Mode: config.EngineModeBind},
	}
	te.env.Engines = ConnectorFunc(func(_ context.Context, name string) (Engine, error) {
		switch name {
		case "a":
			return a, nil
		case "b":
			return b, nil
		}
		return te.fake, nil
	})
	// Empty: a has more.
	o := detached("first")
	o.Engine, o.Memory = config.EngineAuto, "6g"
	res, err := te.env.Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sandbox.Record.Engine != "a" {
		t.Fatalf("first sandbox on %q, want a (8g free against 4g)", res.Sandbox.Record.Engine)
	}
	// Now a has 2g left after the first sandbox's 6g limit; b has 4g.
	te.env.Config.DefaultEngine = config.EngineAuto
	res, err = te.env.Start(context.Background(), detached("second"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Sandbox.Record.Engine != "b" {
		t.Errorf("second sandbox on %q, want b (4g left against 2g)", res.Sandbox.Record.Engine)
	}
}
