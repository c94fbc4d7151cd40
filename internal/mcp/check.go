package mcp

import (
	"context"
	"fmt"
	"io"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/internal/proc"
)

// Checked is what Check found: the server answered initialize and listed
// its tools.
type Checked struct {
	// Server is the name and version it gave; Tools how many it offers.
	Server string
	Tools  int
}

// Check starts git sandbox mcp from this binary in dir, as a client would
// start it, and asks it what a client asks first: initialize, then the
// tool list. stderr receives what the server prints there.
func Check(ctx context.Context, dir string, stderr io.Writer) (*Checked, error) {
	cmd, err := proc.Self(dir, "mcp")
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "git-sandbox-doctor", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, nil)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	out := &Checked{Tools: len(res.Tools)}
	if init := cs.InitializeResult(); init != nil && init.ServerInfo != nil {
		out.Server = init.ServerInfo.Name + " " + init.ServerInfo.Version
	}
	return out, nil
}
