package engines

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/docker/go-units"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// Placer chooses where new sandboxes go, and brings their image there.
type Placer struct {
	Config *config.Loaded
	// Connect reaches an engine by its name in Config ("" for the
	// environment's), once per name.
	Connect func(ctx context.Context, name string) (container.Engine, error)
	UI      *ui.Printer
}

// Choose returns the engine a new sandbox goes to: --engine, else
// default_engine, else the environment's (""). "auto" picks the configured
// engine with the most memory left after the limits of the sandboxes
// already there, among those under their max_sandboxes.
func (e Placer) Choose(ctx context.Context, asked string) (string, error) {
	name := asked
	if name == "" {
		name = e.Config.DefaultEngine
	}
	if name == "" {
		return "", nil
	}
	if name != config.EngineAuto {
		c, err := e.Config.EngineNamed(name)
		if err != nil {
			return "", err
		}
		return name, e.checkRoom(ctx, c)
	}
	if len(e.Config.Engines) == 0 {
		return "", usererr.New("engine \"auto\" needs engines in your config").
			Hint("add [[engine]] tables to %s", config.UserPath())
	}
	type cand struct {
		name string
		free int64
		err  error
	}
	out := make([]cand, len(e.Config.Engines))
	var wg sync.WaitGroup
	for i := range e.Config.Engines {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := &e.Config.Engines[i]
			out[i] = cand{name: c.Name}
			if err := e.checkRoom(ctx, c); err != nil {
				out[i].err = err
				return
			}
			out[i].free, out[i].err = e.freeMemory(ctx, c.Name)
		}(i)
	}
	wg.Wait()
	best := -1
	var why []string
	for i, c := range out {
		if c.err != nil {
			why = append(why, fmt.Sprintf("%s: %v", c.name, c.err))
			continue
		}
		if best < 0 || c.free > out[best].free {
			best = i
		}
	}
	if best < 0 {
		ue := usererr.New("no configured engine can take a sandbox")
		for _, w := range why {
			ue = ue.Hint("%s", termsafe.String(w))
		}
		return "", ue
	}
	e.UI.Infof("engine %s (the most memory left)", out[best].name)
	return out[best].name, nil
}

// checkRoom refuses an engine that has max_sandboxes sandboxes already.
func (e Placer) checkRoom(ctx context.Context, c *config.Engine) error {
	if c.MaxSandboxes <= 0 {
		return nil
	}
	d, err := e.Connect(ctx, c.Name)
	if err != nil {
		return err
	}
	list, err := d.List(ctx, container.LabelRole+"="+container.RoleAgent)
	if err != nil {
		return err
	}
	if len(list) >= c.MaxSandboxes {
		return usererr.New("engine %s has %d sandboxes, its max_sandboxes", c.Name, len(list)).
			Hint("remove one there (git sandbox ps lists them), or choose another engine with --engine")
	}
	return nil
}

// freeMemory is an engine's memory less the memory limits of the sandbox
// containers on it.
func (e Placer) freeMemory(ctx context.Context, name string) (int64, error) {
	d, err := e.Connect(ctx, name)
	if err != nil {
		return 0, err
	}
	total, err := d.MemoryBytes(ctx)
	if container.IsNotSupported(err) {
		return 0, fmt.Errorf("the engine does not report its size")
	}
	if err != nil {
		return 0, err
	}
	list, err := d.List(ctx, container.LabelRole+"="+container.RoleAgent)
	if err != nil {
		return 0, err
	}
	for _, c := range list {
		n, _ := strconv.ParseInt(c.Labels[container.LabelMemory], 10, 64)
		total -= n
	}
	return total, nil
}

// Ship copies the image from the environment's engine to a
// configured engine that lacks it (docker save | docker load, streamed),
// saying how much went. Nothing happens when the engine has it, or when
// the local engine does not have it either (start then builds the default
// image there, or says it is missing).
func (e Placer) Ship(ctx context.Context, d container.Engine, engine, image string) error {
	if engine == "" {
		return nil
	}
	if ok, err := d.Images().Exists(ctx, image); err != nil || ok {
		return err
	}
	local, err := e.Connect(ctx, "")
	if err != nil {
		return nil // nothing to ship from
	}
	if ok, err := local.Images().Exists(ctx, image); err != nil || !ok {
		return nil
	}
	if !local.Abilities().MoveImages || !d.Abilities().MoveImages {
		return nil
	}
	r, err := local.Images().Save(ctx, image)
	if err != nil {
		return err
	}
	defer r.Close()
	step := e.UI.Step("image %s is missing on engine %s; copying it there from the local engine", image, engine)
	if err := d.Images().Load(ctx, &countingReader{r: r, step: step}); err != nil {
		step.Fail()
		return usererr.Wrap(err, "could not copy image %s to engine %s: %v", termsafe.String(image), termsafe.String(engine), err).
			Hint("copy it by hand (docker save %s | docker -H HOST load), or build it there", termsafe.String(image))
	}
	step.Done("image %s copied to engine %s (%s)", termsafe.String(image), termsafe.String(engine), units.HumanSize(float64(step.Bytes())))
	return nil
}

// countingReader counts what passes into the step that shows it.
type countingReader struct {
	r    io.Reader
	step *ui.Step
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.step.Add(int64(n))
	return n, err
}
