package enginetest

import (
	"context"
	"io"
	"strconv"
	"strings"
)

// Program is what a container or an exec of the suite does. Argv is how
// an engine that runs processes runs it (with /bin/sh); Run is how an
// engine that runs none (the fake, a fake kubelet) acts it out, so that
// every engine is held to the same observable behaviour.
type Program struct {
	// Echo copies stdin to stdout first, until stdin ends.
	Echo bool
	// PrintDir then prints the working directory and a colon.
	PrintDir bool
	// Stdout is printed next, after the value of $GS_SUITE; Stderr is
	// printed on stderr.
	Stdout, Stderr string
	// Forever then sleeps until the process is stopped; otherwise the
	// program exits with Code.
	Forever bool
	Code    int
}

// EnvVar is the variable a Program prints before Stdout.
const EnvVar = "GS_SUITE"

// script is the shell program every Program runs as; its arguments are
// the Program's fields.
const script = `[ -n "$4" ] && cat
[ -n "$5" ] && printf '%s:' "$PWD"
printf '%s%s' "$` + EnvVar + `" "$1"
printf '%s' "$2" >&2
[ -n "$6" ] && exec sleep 86400
exit "$3"`

// Argv is the program as a command.
func (p Program) Argv() []string {
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return ""
	}
	return []string{"/bin/sh", "-c", script, "gs-suite", p.Stdout, p.Stderr, strconv.Itoa(p.Code), flag(p.Echo), flag(p.PrintDir), flag(p.Forever)}
}

// ProgramOf reads a command Argv made; ok is false for any other command.
func ProgramOf(argv []string) (p Program, ok bool) {
	if len(argv) != 10 || argv[0] != "/bin/sh" || argv[1] != "-c" || argv[2] != script {
		return Program{}, false
	}
	code, err := strconv.Atoi(argv[6])
	if err != nil {
		return Program{}, false
	}
	return Program{Stdout: argv[4], Stderr: argv[5], Code: code, Echo: argv[7] != "", PrintDir: argv[8] != "", Forever: argv[9] != ""}, true
}

// Process is where a Program acts: its environment (KEY=VALUE) and
// working directory.
type Process struct {
	Env []string
	Dir string
}

// Run acts the program out as a shell running Argv would, and returns its
// exit code; a Forever program returns -1 once ctx ends.
func (p Program) Run(ctx context.Context, in Process, stdin io.Reader, stdout, stderr io.Writer) int {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if p.Echo && stdin != nil {
		_, _ = io.Copy(stdout, stdin)
	}
	if p.PrintDir {
		dir := in.Dir
		if dir == "" {
			dir = "/"
		}
		_, _ = io.WriteString(stdout, dir+":")
	}
	var val string
	for _, kv := range in.Env {
		if v, ok := strings.CutPrefix(kv, EnvVar+"="); ok {
			val = v
		}
	}
	_, _ = io.WriteString(stdout, val+p.Stdout)
	_, _ = io.WriteString(stderr, p.Stderr)
	if p.Forever {
		<-ctx.Done()
		return -1
	}
	return p.Code
}
