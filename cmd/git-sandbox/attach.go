package main

// AttachCmd is git sandbox attach.
type AttachCmd struct {
	Branch string `arg:"" help:"The sandbox."`
}

// Run attaches to the agent.
func (c *AttachCmd) Run(app *App) error {
	_, sb, err := app.Find(c.Branch)
	if err != nil {
		return err
	}
	return sb.Attach(app.Ctx, app.IO())
}
