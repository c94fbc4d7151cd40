package mcp

import (
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// result is what a tool answers: a summary the tool itself wrote
// (trusted: states, counts, ids, commands), and, where the answer holds
// anything the agent produced, one block of it.
type result struct {
	// Summary is encoded as JSON (through termsafe, as --json output is).
	Summary any
	// Untrusted, when set, follows the summary as a framed block.
	Untrusted *block
	// Note is a trusted line after everything else (what to do next).
	Note string
}

// send turns a result into the protocol's: text contents only, so every
// byte the agent produced reaches the lead agent inside its block (a
// structuredContent field would carry it outside).
func (r result) send() (*sdk.CallToolResult, error) {
	var content []sdk.Content
	if r.Summary != nil {
		j, err := jsonText(r.Summary)
		if err != nil {
			return nil, err
		}
		content = append(content, &sdk.TextContent{Text: j})
	}
	if r.Untrusted != nil {
		f := r.Untrusted.frame()
		content = append(content, &sdk.TextContent{Text: f.Text})
	}
	if r.Note != "" {
		content = append(content, &sdk.TextContent{Text: r.Note})
	}
	return &sdk.CallToolResult{Content: content}, nil
}

// jsonText is v as indented JSON with every unsafe rune \u-escaped.
func jsonText(v any) (string, error) {
	b, err := termsafe.MarshalJSON(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// failure is a tool error as the lead agent sees it: the exit status the
// command line would end with and what it means, then the message and its
// hints in a block, since messages quote names and text from the sandbox
// (file names, a hook's output).
func failure(tool string, err error) *sdk.CallToolResult {
	code := usererr.Code(err)
	var text strings.Builder
	text.WriteString(err.Error())
	if ue, ok := usererr.As(err); ok {
		for _, h := range ue.Hints {
			fmt.Fprintf(&text, "\nhint: %s", h)
		}
	}
	head := fmt.Sprintf("%s failed (exit status %d on the command line: %s)", tool, code, meaning(code))
	b := block{What: "the error message, which may quote names and text from the sandbox", Body: text.String(), Limit: 16 << 10}
	return &sdk.CallToolResult{
		IsError: true,
		Content: []sdk.Content{&sdk.TextContent{Text: head}, &sdk.TextContent{Text: b.frame().Text}},
	}
}

// meaning names an exit status as git sandbox's help does.
func meaning(code int) string {
	switch {
	case code == usererr.ExitConflict:
		return "conflict"
	case code == usererr.ExitRefused:
		return "refused"
	case code == usererr.ExitTimeout:
		return "timed out"
	}
	return "error"
}
