package agent

// shell runs any command: the words after "--" (a prompt given too is the
// task's description, recorded and passed as GIT_SANDBOX_PROMPT), else the
// prompt as a shell script, else an interactive shell. It has no
// conversation to continue.
type shell struct{}

func init() { register(shell{}) }

func (shell) Name() string { return "shell" }

func (shell) Argv(t Task) ([]string, error) {
	switch {
	case len(t.Args) > 0:
		return t.Args, nil
	case t.Prompt != "":
		return []string{"/bin/sh", "-c", t.Prompt}, nil
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
