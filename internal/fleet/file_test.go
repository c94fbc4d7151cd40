package fleet

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseAcceptsAGoodFile(t *testing.T) {
	f, err := Parse("tasks.toml", []byte(`max_parallel = 3

[[task]]
branch = "a"
agent = "claude"
prompt = "fix it"
verify = "make test"
allow = ["api.example.com"]
[task.limits]
memory = "2g"
cpus = 1.5

[[task]]
branch = "b"
command = ["sh", "-c", "true"]
limits = { pids = 64 }
`))
	if err != nil {
		t.Fatal(err)
	}
	if f.MaxParallel != 3 || len(f.Tasks) != 2 {
		t.Fatalf("file = %+v", f)
	}
	a, b := f.Tasks[0], f.Tasks[1]
	if a.Line != 3 || a.Limits.Memory != "2g" || a.Limits.CPUs != 1.5 || a.Allow[0] != "api.example.com" {
		t.Errorf("task a = %+v", a)
	}
	if b.Line != 13 || b.Agent != "shell" || b.Limits.Pids != 64 {
		t.Errorf("task b = %+v (a command implies the shell agent)", b)
	}
}

func TestParseReportsEveryProblemWithItsLine(t *testing.T) {
	_, err := Parse("t.toml", []byte(`max_parallel = 0
speed = 3

[[task]]
branch = "a"
command = ["true"]
colour = "red"

[[task]]
branch = "a"
agent = "claude"
command = ["x"]

[[task]]
agent = "claude"

[[task]]
branch = "c"
agent = "shell"
limits = { cpus = 0.001, pids = 2 }
`))
	var p *Problems
	if !errors.As(err, &p) {
		t.Fatalf("err = %v, want Problems", err)
	}
	want := []string{
		"t.toml:1: max_parallel = 0",
		"t.toml:2: unknown key speed",
		"t.toml:7: unknown key colour in [[task]] 1",
		"t.toml:10: branch a is also the branch of the task at line 4",
		"t.toml:12: [[task]] 2: command is the shell agent's",
		"t.toml:14: [[task]] 3 has no branch",
		"t.toml:14: [[task]] 3: a fleet's agents run without a terminal",
		"t.toml:19: [[task]] 4: the shell agent needs a command",
		"t.toml:20: [[task]] 4: limits.cpus",
		"t.toml:20: [[task]] 4: limits.pids",
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("missing %q in:\n%s", w, msg)
		}
	}
	if !strings.HasPrefix(msg, "t.toml: ") || !strings.Contains(msg, "nothing was started") {
		t.Errorf("message = %s", msg)
	}
}

func TestParseRefusesBranchesGitCannotHoldTogether(t *testing.T) {
	_, err := Parse("t.toml", []byte("[[task]]\nbranch = \"a\"\ncommand = [\"true\"]\n[[task]]\nbranch = \"a/b\"\ncommand = [\"true\"]\n"))
	if err == nil || !strings.Contains(err.Error(), "t.toml:4: branch a/b cannot exist beside branch a (task at line 1)") {
		t.Errorf("err = %v", err)
	}
}

func TestParseSyntaxAndDuplicateKeysNameTheLine(t *testing.T) {
	_, err := Parse("t.toml", []byte("[[task]]\nbranch = \"a\"\nbranch = \"b\"\n"))
	if err == nil || !strings.Contains(err.Error(), "t.toml:3:") {
		t.Errorf("duplicate key: %v", err)
	}
	_, err = Parse("t.toml", []byte(""))
	if err == nil || !strings.Contains(err.Error(), "no [[task]]") {
		t.Errorf("empty file: %v", err)
	}
}

type fakeChecker struct{ branches, sandboxes map[string]bool }

func (c fakeChecker) ValidBranch(name string) error {
	if strings.Contains(name, "..") {
		return errors.New("bad")
	}
	return nil
}
func (c fakeChecker) BranchExists(name string) (bool, error) { return c.branches[name], nil }
func (c fakeChecker) SandboxExists(name string) bool         { return c.sandboxes[name] }
func (c fakeChecker) BaseExists(ref string) bool             { return ref == "main" }
func (c fakeChecker) Agent(name string) error {
	if name == "shell" || name == "claude" {
		return nil
	}
	return errors.New("unknown agent " + name)
}
func (c fakeChecker) Allow(entry string) error {
	if strings.Contains(entry, " ") {
		return errors.New("not a host")
	}
	return nil
}

func TestCheckAgainstTheRepository(t *testing.T) {
	f, err := Parse("t.toml", []byte(`
[[task]]
branch = "a..b"
command = ["true"]

[[task]]
branch = "exists"
command = ["true"]
base = "nope"

[[task]]
branch = "box"
agent = "robot"
prompt = "p"
allow = ["a b"]
`))
	if err != nil {
		t.Fatal(err)
	}
	err = Check("t.toml", f, fakeChecker{branches: map[string]bool{"exists": true}, sandboxes: map[string]bool{"box": true}})
	for _, w := range []string{
		"t.toml:2: [[task]] 1: invalid branch name",
		"t.toml:6: [[task]] 2: branch exists, or one git cannot hold beside it, exists already",
		"t.toml:6: [[task]] 2: base nope does not exist",
		"t.toml:11: [[task]] 3: a sandbox box exists already",
		"t.toml:11: [[task]] 3: unknown agent robot",
		"t.toml:11: [[task]] 3: allow \"a b\"",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
}

// TestCheckTasksGivenAsData: tasks that come as data (git sandbox mcp's
// fleet_start) get every check a file gets, each task's number standing
// for its line.
func TestCheckTasksGivenAsData(t *testing.T) {
	f := &File{MaxParallel: 300, Tasks: []Task{
		{Branch: "a", Command: []string{"true"}},
		{Branch: "a", Agent: "claude"},
		{Branch: "a/b", Agent: "shell", Base: "nope"},
		{Agent: "robot", Prompt: "p", Allow: []string{"a b"}},
	}}
	err := CheckTasks("tasks", f, fakeChecker{})
	for _, w := range []string{
		"tasks: max_parallel = 300",
		"tasks:2: branch a is also the branch of the task at line 1",
		"tasks:2: [[task]] 2: a fleet's agents run without a terminal, so each needs a prompt",
		"tasks:3: [[task]] 3: the shell agent needs a command",
		"tasks:3: branch a/b cannot exist beside branch a",
		"tasks:3: [[task]] 3: base nope does not exist",
		"tasks:4: [[task]] 4 has no branch",
		"tasks:4: [[task]] 4: unknown agent robot",
		"tasks:4: [[task]] 4: allow \"a b\"",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in %v", w, err)
		}
	}
	if f.Tasks[0].Agent != "shell" {
		t.Errorf("a task with a command and no agent gets %q, want shell", f.Tasks[0].Agent)
	}
	ok := &File{Tasks: []Task{{Branch: "x", Command: []string{"true"}}, {Branch: "y", Agent: "claude", Prompt: "p"}}}
	if err := CheckTasks("tasks", ok, fakeChecker{}); err != nil {
		t.Errorf("good tasks refused: %v", err)
	}
	if err := CheckTasks("tasks", &File{}, fakeChecker{}); err == nil || !strings.Contains(err.Error(), "nothing to start") {
		t.Errorf("no tasks: %v", err)
	}
}

// The shipped example parses and passes the checks that need no
// repository.
func TestExampleFileParses(t *testing.T) {
	b, err := os.ReadFile("../../tasks.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("tasks.toml.example", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tasks) < 2 {
		t.Errorf("the example has %d task(s)", len(f.Tasks))
	}
	if err := Check("tasks.toml.example", f, fakeChecker{}); err != nil {
		t.Error(err)
	}
}

func TestDefaultParallel(t *testing.T) {
	for _, c := range []struct {
		mem, per int64
		cpus     int
		want     int
	}{
		{16 << 30, 8 << 30, 4, 2},
		{1 << 30, 8 << 30, 4, 1},
		{64 << 30, 1 << 30, 4, 8},
		{64 << 30, 0, 4, 4},
		{0, 1 << 30, 3, 3},
	} {
		if got := DefaultParallel(c.mem, c.per, c.cpus); got != c.want {
			t.Errorf("DefaultParallel(%d, %d, %d) = %d, want %d", c.mem, c.per, c.cpus, got, c.want)
		}
	}
}
