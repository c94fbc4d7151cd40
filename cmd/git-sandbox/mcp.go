package main

import (
	"github.com/git-sandbox/git-sandbox/internal/mcp"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// MCPCmd is git sandbox mcp.
type MCPCmd struct {
	HTTP string `name:"http" placeholder:"ADDR" help:"Serve over HTTP on ADDR, a loopback address such as 127.0.0.1:8765, instead of stdin and stdout; the bearer token is printed once."`
}

// Help is mcp's long help: what it serves, then every tool.
func (c *MCPCmd) Help() string {
	return `Serves the Model Context Protocol for this repository (or -C PATH), so that
the agent you talk to (Claude Code, Cursor, Codex, Goose…) can hand tasks out
to sandboxes, watch them and review their work. Clients that start it as a
command talk over stdin and stdout:

  claude mcp add git-sandbox -- git sandbox mcp

--http ADDR serves it over HTTP on a loopback address instead; every request
must carry the bearer token printed at start (Authorization: Bearer TOKEN).

Everything a sandboxed agent produced (its output, file names, diffs, commit
messages, host names) reaches the client escaped, size-capped and inside a
block marked "` + mcp.Marker + `", as data, never as instructions.

Landing stays yours: sandbox_land lands only with mcp.allow_land = true in your
own config (a repository's .sandbox.toml cannot set it); otherwise it answers
with the git sandbox land command for you to run. mcp.tools = [...] narrows the
tools offered. The config is read when the server starts.

Resources: sandbox://BRANCH/log and sandbox://BRANCH/diff (its newest
snapshot's change), with notifications to subscribers when they change.

Tools:
` + mcp.ToolHelp()
}

// Run serves until the client goes (stdio) or the command is stopped.
func (c *MCPCmd) Run(app *App) error {
	if c.HTTP != "" {
		// Refused before the repository is opened.
		if _, err := mcp.LoopbackAddr(c.HTTP); err != nil {
			return err
		}
	}
	env, err := app.Env()
	if err != nil {
		return err
	}
	srv, err := mcp.New(mcp.Options{Env: env, Version: version.String(), Log: app.UI.Writer()})
	if err != nil {
		return err
	}
	if c.HTTP == "" {
		return srv.ServeStdio(app.Ctx, app.Stdin, app.Stdout)
	}
	return srv.ServeHTTP(app.Ctx, c.HTTP, func(l mcp.Listening) {
		app.UI.Infof("mcp: serving %s at %s (%d tools; landing %s)", env.Repo.MainWorkTree, l.URL, len(srv.Tools()), landingState(srv.AllowLand()))
		app.UI.Infof("mcp: bearer token (shown once): %s", l.Token)
		app.UI.Hintf("clients send it as Authorization: Bearer TOKEN")
	})
}

func landingState(allow bool) string {
	if allow {
		return "allowed (mcp.allow_land)"
	}
	return "yours (the tool answers with the command)"
}
