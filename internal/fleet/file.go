// Package fleet owns fleets: a tasks file that describes many sandboxes,
// its checks (the whole file is refused, with line numbers, before
// anything starts), the fleet's state under the repository's state
// directory, the runner that starts queued tasks as running ones exit (at
// most max_parallel at once), and the landing queue that lands finished
// sandboxes one after another, each verified on the tree the base will
// hold. Starting, stopping and landing one sandbox stay internal/sandbox's;
// this package decides their order.
package fleet

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/meter"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
)

// File is a decoded tasks file.
type File struct {
	// MaxParallel is how many tasks run at once; 0 means the default
	// (DefaultParallel).
	MaxParallel int `toml:"max_parallel"`
	// Budget is the dollars the whole fleet may spend on model calls:
	// once spent, no queued task starts.
	Budget string `toml:"budget"`
	// Tasks are the [[task]] tables, in file order.
	Tasks []Task `toml:"task"`
}

// Task is one [[task]]: the flags of one git sandbox start -d.
type Task struct {
	Branch string `toml:"branch" json:"branch"`
	Agent  string `toml:"agent" json:"agent,omitempty"`
	Prompt string `toml:"prompt" json:"prompt,omitempty"`
	// Command is the argv of the shell agent.
	Command []string      `toml:"command" json:"command,omitempty"`
	Base    string        `toml:"base" json:"base,omitempty"`
	Verify  string        `toml:"verify" json:"verify,omitempty"`
	Allow   []string      `toml:"allow" json:"allow,omitempty"`
	Limits  config.Limits `toml:"limits" json:"limits"`
	// Budget is the dollars the task's sandbox may spend (start --budget).
	Budget string `toml:"budget" json:"budget,omitempty"`
	// Line is where the task's [[task]] header is.
	Line int `toml:"-" json:"line"`
}

// MaxParallelLimit is the largest max_parallel a file may ask for.
const MaxParallelLimit = 256

// Problem is one thing wrong with a tasks file.
type Problem struct {
	Line int
	Msg  string
}

// Problems is every problem of a file; the file is refused whole.
type Problems struct {
	Path string
	List []Problem
}

func (p *Problems) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problem(s); nothing was started", p.Path, len(p.List))
	for _, x := range p.List {
		if x.Line > 0 {
			fmt.Fprintf(&b, "\n  %s:%d: %s", p.Path, x.Line, x.Msg)
		} else {
			fmt.Fprintf(&b, "\n  %s: %s", p.Path, x.Msg)
		}
	}
	return b.String()
}

func (p *Problems) add(line int, format string, args ...any) {
	p.List = append(p.List, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (p *Problems) err() error {
	if len(p.List) == 0 {
		return nil
	}
	sort.SliceStable(p.List, func(i, j int) bool { return p.List[i].Line < p.List[j].Line })
	return p
}

// Parse decodes a tasks file and checks everything that needs no
// repository: unknown keys, duplicate branches, values out of range, a
// command for an agent other than shell. path names the file in messages.
func Parse(path string, data []byte) (*File, error) {
	f, probs := parse(path, data)
	if err := probs.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// parse is Parse keeping the decoded file beside its problems, so Load
// can check the rest too and report everything at once.
func parse(path string, data []byte) (*File, *Problems) {
	probs := &Problems{Path: path}
	var f File
	md, err := toml.Decode(string(data), &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			probs.add(pe.Position.Line, "%s", pe.Message)
		} else {
			probs.add(0, "%v", err)
		}
		return nil, probs
	}
	loc := newLocator(data)
	for i := range f.Tasks {
		f.Tasks[i].Line = loc.taskLine(i)
	}
	// Undecoded keys come in file order, as Keys() does: walking both
	// tells which [[task]] each belongs to.
	und := md.Undecoded()
	task := -1
	for _, k := range md.Keys() {
		if len(k) == 1 && k[0] == "task" {
			task++
		}
		if len(und) == 0 || und[0].String() != k.String() {
			continue
		}
		und = und[1:]
		if len(k) > 1 && k[0] == "task" && task >= 0 {
			probs.add(loc.keyLine(task, k[len(k)-1]), "unknown key %s in [[task]] %d", termsafe.String(strings.Join(k[1:], ".")), task+1)
			continue
		}
		probs.add(loc.topLine(k[0]), "unknown key %s", termsafe.String(k.String()))
	}
	if md.IsDefined("max_parallel") && (f.MaxParallel < 1 || f.MaxParallel > MaxParallelLimit) {
		probs.add(loc.topLine("max_parallel"), "max_parallel = %d: must be from 1 to %d", f.MaxParallel, MaxParallelLimit)
	}
	if _, err := f.FleetBudget(); err != nil {
		probs.add(loc.topLine("budget"), "%v", err)
	}
	checkTasks(probs, loc, &f)
	return &f, probs
}

// checkTasks checks the decoded tasks: there are some, each is complete
// and in range, and no two branches clash.
func checkTasks(probs *Problems, loc *locator, f *File) {
	if len(f.Tasks) == 0 && len(probs.List) == 0 {
		probs.add(0, "no [[task]] tables: there is nothing to start")
	}
	seen := map[string]int{}
	for i := range f.Tasks {
		checkTask(probs, loc, i, &f.Tasks[i], seen)
	}
	// git cannot hold both a and a/b as branches.
	for _, a := range f.Tasks {
		for _, b := range f.Tasks {
			if a.Branch != "" && strings.HasPrefix(b.Branch, a.Branch+"/") {
				probs.add(b.Line, "branch %s cannot exist beside branch %s (task at line %d)", termsafe.String(b.Branch), termsafe.String(a.Branch), a.Line)
			}
		}
	}
}

// CheckTasks makes every check Load makes, for tasks given as data rather
// than read from a file (git sandbox mcp's fleet_start). There are no
// lines: each task's number stands for its line in messages, and name for
// the file.
func CheckTasks(name string, f *File, c Checker) error {
	probs := &Problems{Path: name}
	if f.MaxParallel < 0 || f.MaxParallel > MaxParallelLimit {
		probs.add(0, "max_parallel = %d: must be from 1 to %d (0: the default)", f.MaxParallel, MaxParallelLimit)
	}
	// One empty line per task: the i-th task is line i+1.
	loc := &locator{lines: make([]string, len(f.Tasks))}
	for i := range f.Tasks {
		f.Tasks[i].Line = i + 1
		loc.tasks = append(loc.tasks, i)
	}
	checkTasks(probs, loc, f)
	check(probs, f, c)
	return probs.err()
}

func checkTask(probs *Problems, loc *locator, i int, t *Task, seen map[string]int) {
	line := func(key string) int { return loc.keyLine(i, key) }
	n := i + 1
	switch {
	case t.Branch == "":
		probs.add(t.Line, "[[task]] %d has no branch", n)
	case seen[t.Branch] != 0:
		probs.add(line("branch"), "branch %s is also the branch of the task at line %d", termsafe.String(t.Branch), seen[t.Branch])
	default:
		seen[t.Branch] = t.Line
	}
	if len(t.Command) > 0 && t.Agent == "" {
		t.Agent = "shell"
	}
	switch {
	case t.Agent == "shell" && len(t.Command) == 0:
		probs.add(line("agent"), "[[task]] %d: the shell agent needs a command (command = [\"sh\", \"-c\", \"…\"])", n)
	case t.Agent != "shell" && len(t.Command) > 0:
		probs.add(line("command"), "[[task]] %d: command is the shell agent's; the %s agent takes a prompt", n, termsafe.String(t.Agent))
	case t.Agent != "shell" && strings.TrimSpace(t.Prompt) == "":
		probs.add(t.Line, "[[task]] %d: a fleet's agents run without a terminal, so each needs a prompt", n)
	}
	for _, a := range t.Command {
		if strings.ContainsRune(a, 0) {
			probs.add(line("command"), "[[task]] %d: command holds a NUL byte", n)
			break
		}
	}
	if _, err := meter.ParseDollars(t.Budget); t.Budget != "" && err != nil {
		probs.add(line("budget"), "[[task]] %d: budget: %v", n, err)
	}
	if t.Limits.Memory != "" {
		if err := config.CheckMemory("", "limits.memory", t.Limits.Memory); err != nil {
			probs.add(line("memory"), "[[task]] %d: limits.memory = %q: must be a size of at least 6m (such as 512m or 8g), or \"0\" for no limit", n, t.Limits.Memory)
		}
	}
	if t.Limits.CPUs != 0 {
		if err := config.CheckCPUs("", "limits.cpus", t.Limits.CPUs); err != nil {
			probs.add(line("cpus"), "[[task]] %d: limits.cpus = %g: must be from %g to %d", n, t.Limits.CPUs, config.MinCPUs, config.MaxCPUs)
		}
	}
	if t.Limits.Pids != 0 {
		if err := config.CheckPids("", "limits.pids", t.Limits.Pids); err != nil {
			probs.add(line("pids"), "[[task]] %d: limits.pids = %d: must be from %d to %d", n, t.Limits.Pids, config.MinPids, config.MaxPids)
		}
	}
}

// Checker answers what Check asks of the repository.
type Checker interface {
	// ValidBranch refuses a name git does not accept for a branch.
	ValidBranch(name string) error
	// BranchExists reports whether refs/heads/<name> exists, or a branch
	// git cannot hold beside it (a/b beside a).
	BranchExists(name string) (bool, error)
	// SandboxExists reports whether a sandbox of that branch exists.
	SandboxExists(name string) bool
	// BaseExists reports whether a base resolves to a commit.
	BaseExists(ref string) bool
	// Agent refuses an agent that is not known.
	Agent(name string) error
	// Allow refuses an allow list entry.
	Allow(entry string) error
}

// Check checks what needs the repository: branch names, branches that
// exist already, bases, agents and allow entries. Every problem is
// reported, not only the first.
func Check(path string, f *File, c Checker) error {
	probs := &Problems{Path: path}
	check(probs, f, c)
	return probs.err()
}

func check(probs *Problems, f *File, c Checker) {
	for i, t := range f.Tasks {
		n := i + 1
		if t.Branch != "" {
			if err := c.ValidBranch(t.Branch); err != nil {
				probs.add(t.Line, "[[task]] %d: invalid branch name %q", n, t.Branch)
			} else if c.SandboxExists(t.Branch) {
				probs.add(t.Line, "[[task]] %d: a sandbox %s exists already (git sandbox ps)", n, termsafe.String(t.Branch))
			} else if ok, err := c.BranchExists(t.Branch); err != nil {
				probs.add(t.Line, "[[task]] %d: %v", n, err)
			} else if ok {
				probs.add(t.Line, "[[task]] %d: branch %s, or one git cannot hold beside it, exists already; a fleet creates its branches", n, termsafe.String(t.Branch))
			}
		}
		if t.Base != "" && !c.BaseExists(t.Base) {
			probs.add(t.Line, "[[task]] %d: base %s does not exist", n, termsafe.String(t.Base))
		}
		if t.Agent != "" {
			if err := c.Agent(t.Agent); err != nil {
				probs.add(t.Line, "[[task]] %d: %v", n, err)
			}
		}
		for _, a := range t.Allow {
			if err := c.Allow(a); err != nil {
				probs.add(t.Line, "[[task]] %d: allow %q: %v", n, a, err)
			}
		}
	}
}

// Load reads, parses and checks a tasks file.
func Load(path string, c Checker) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the tasks file: %w", err)
	}
	f, probs := parse(path, b)
	if f != nil {
		check(probs, f, c)
	}
	if err := probs.err(); err != nil {
		return nil, err
	}
	return f, nil
}

// locator finds the lines of keys in the file's text: the TOML decoder
// keeps positions to itself.
type locator struct {
	lines []string
	tasks []int // 0-based line index of each [[task]] header
}

var taskHeader = regexp.MustCompile(`^\s*\[\[\s*task\s*\]\]`)
var anyHeader = regexp.MustCompile(`^\s*\[`)

func newLocator(data []byte) *locator {
	l := &locator{lines: strings.Split(string(data), "\n")}
	for i, s := range l.lines {
		if taskHeader.MatchString(s) {
			l.tasks = append(l.tasks, i)
		}
	}
	return l
}

// taskLine is the 1-based line of the i-th [[task]] header.
func (l *locator) taskLine(i int) int {
	if i < len(l.tasks) {
		return l.tasks[i] + 1
	}
	return 0
}

func keyPattern(key string) *regexp.Regexp {
	q := regexp.QuoteMeta(key)
	return regexp.MustCompile(`(^|[\s{,.])("` + q + `"|'` + q + `'|` + q + `)\s*=`)
}

// keyLine is the line of key in the i-th task (its header when not found).
func (l *locator) keyLine(i int, key string) int {
	if i >= len(l.tasks) {
		return 0
	}
	end := len(l.lines)
	if i+1 < len(l.tasks) {
		end = l.tasks[i+1]
	}
	re := keyPattern(key)
	for j := l.tasks[i]; j < end; j++ {
		if re.MatchString(l.lines[j]) {
			return j + 1
		}
	}
	return l.tasks[i] + 1
}

// topLine is the line of a key before any table.
func (l *locator) topLine(key string) int {
	re := keyPattern(key)
	for j, s := range l.lines {
		if anyHeader.MatchString(s) {
			if taskHeader.MatchString(s) {
				break
			}
			// A [table] of its own: its name is the key.
			if strings.Contains(s, key) {
				return j + 1
			}
			continue
		}
		if re.MatchString(s) {
			return j + 1
		}
	}
	return 0
}
