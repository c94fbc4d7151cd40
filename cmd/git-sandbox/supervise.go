package main

import "time"

// SuperviseCmd runs the supervisor that start spawns.
type SuperviseCmd struct {
	Branch   string        `arg:""`
	Interval time.Duration `default:"2m"`
}

// Run supervises the sandbox until its agent exits.
func (c *SuperviseCmd) Run(app *App) error {
	env, err := app.Env()
	if err != nil {
		return err
	}
	return env.Supervise(app.Ctx, c.Branch, c.Interval)
}
