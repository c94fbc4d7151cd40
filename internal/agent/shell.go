package agent

import "github.com/git-sandbox/git-sandbox/internal/usererr"

// shell runs any command: the words after "--" (a prompt given too is the
// task's description, recorded and passed as GIT_SANDBOX_PROMPT), else an
// interactive shell. A prompt alone is refused: it is a task for an agent
// that reads one, and run as a command it would only fail (or worse). It
// has no conversation to continue.
type shell struct{}

func init() { register(shell{}) }

func (shell) Name() string { return "shell" }

func (shell) Argv(t Task) ([]string, error) {
	switch {
	case len(t.Args) > 0:
		return t.Args, nil
	case t.Prompt != "":
		return nil, usererr.New("the shell agent runs a command, not a prompt: -p alone gives it nothing to run").
			Hint("give the command after --: git sandbox start BRANCH --agent shell -p TASK -- sh -c 'SCRIPT' (-p is then the task's description)").
			Hint("or name an agent that reads a prompt: --agent claude, --agent codex")
	default:
		return []string{"/bin/bash", "-l"}, nil
	}
}

func (shell) Interactive(t Task) bool { return len(t.Args) == 0 && t.Prompt == "" }

func (shell) LoginPaths() []string { return nil }

func (shell) Env() []string { return nil }

func (shell) Package() string { return "" }

// Hosts: none; what a command needs is for the user to allow.
func (shell) Hosts() []string { return nil }
