package agent

// codex is OpenAI's Codex CLI. Its own sandbox cannot work in an
// unprivileged container and is not needed in one, so it is bypassed.
type codex struct{}

func init() { register(codex{}) }

func (codex) Name() string { return "codex" }

// Argv: a follow-up goes on with the newest session (codex exec resume
// --last PROMPT headless, codex resume --last interactively).
func (codex) Argv(t Task) ([]string, error) {
	if t.Prompt != "" {
		argv := []string{"codex", "exec", "--dangerously-bypass-approvals-and-sandbox"}
		argv = append(argv, t.Args...)
		if t.Continue {
			argv = append(argv, "resume", "--last")
		}
		return append(argv, t.Prompt), nil
	}
	if t.Continue {
		return append([]string{"codex", "resume", "--last", "--dangerously-bypass-approvals-and-sandbox"}, t.Args...), nil
	}
	return append([]string{"codex", "--dangerously-bypass-approvals-and-sandbox"}, t.Args...), nil
}

func (codex) Interactive(t Task) bool { return t.Prompt == "" }

func (codex) LoginPaths() []string {
	return []string{".codex/auth.json"}
}

func (codex) Env() []string { return nil }

func (codex) Package() string { return "@openai/codex" }

// Hosts: the API (api.openai.com), the login (auth.openai.com) and the
// ChatGPT backend that subscription logins talk to (chatgpt.com).
func (codex) Hosts() []string {
	return []string{"api.openai.com", "auth.openai.com", "chatgpt.com"}
}
