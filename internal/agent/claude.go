package agent

// claude is Anthropic's Claude Code. Inside the container it may do anything
// without asking: the container is the sandbox. IS_SANDBOX=1 is how Claude
// Code is told so, which it requires before skipping permissions as root.
type claude struct{}

func init() { register(claude{}) }

func (claude) Name() string { return "claude" }

func (claude) Argv(t Task) ([]string, error) {
	argv := []string{"claude", "--dangerously-skip-permissions"}
	if t.Continue {
		argv = append(argv, "--continue")
	}
	if t.Prompt != "" {
		argv = append(argv, "-p", t.Prompt)
		// A headless run prints only its final answer either way; as JSON
		// it also reports tokens and cost (ParseUsage), unless the user
		// chose another format.
		if !hasFlag(t.Args, "--output-format") {
			argv = append(argv, "--output-format", "json")
		}
	}
	return append(argv, t.Args...), nil
}

func (claude) Interactive(t Task) bool { return t.Prompt == "" }

func (claude) LoginPaths() []string {
	return []string{".claude/.credentials.json", ".claude.json"}
}

func (claude) Env() []string { return []string{"IS_SANDBOX=1"} }

func (claude) Package() string { return "@anthropic-ai/claude-code" }

// Hosts: the API (api.anthropic.com), the login flows (console.anthropic.com
// for API-key accounts, claude.ai for subscriptions) and the feature-flag
// service the CLI waits for at start (statsig.anthropic.com). Error
// reporting (sentry.io) is left out: the CLI works without it.
func (claude) Hosts() []string {
	return []string{"api.anthropic.com", "console.anthropic.com", "claude.ai", "statsig.anthropic.com"}
}
