package fleet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/agent"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/proc"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/land"
	"github.com/git-sandbox/git-sandbox/worktree"
)

// Sandboxes is the fleet's way to the repository's sandboxes: the
// Checker of tasks files, the runner's Start and the queue's Lander.
type Sandboxes struct {
	Env *sandbox.Env
	// Out receives what starts and verify runs print.
	Out io.Writer
}

var _ Checker = (*Sandboxes)(nil)
var _ Lander = (*Sandboxes)(nil)

func (s *Sandboxes) io() sandbox.IO {
	out := s.Out
	if out == nil {
		out = io.Discard
	}
	return sandbox.IO{Stdin: strings.NewReader(""), Stdout: out, Stderr: out}
}

// ValidBranch implements Checker.
func (s *Sandboxes) ValidBranch(name string) error {
	return worktree.ValidBranch(context.Background(), s.Env.Git(), name)
}

// BranchExists implements Checker. A branch that git could not create
// beside the existing ones counts too: "a" when "a/b" exists, or "a/b"
// when "a" does (a ref is a file or a directory, not both).
func (s *Sandboxes) BranchExists(name string) (bool, error) {
	ctx := context.Background()
	g := s.Env.Git()
	for p := name; ; {
		_, err := g.RevParse(ctx, "refs/heads/"+p)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, gitcmd.ErrNotExist) {
			return false, err
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	below, err := g.Lines(ctx, "for-each-ref", "--count=1", "--format=%(refname)", "refs/heads/"+name+"/")
	return len(below) > 0, err
}

// SandboxExists implements Checker.
func (s *Sandboxes) SandboxExists(name string) bool {
	_, err := s.Env.Find(name)
	return err == nil
}

// BaseExists implements Checker.
func (s *Sandboxes) BaseExists(ref string) bool {
	if strings.HasPrefix(ref, "-") {
		return false
	}
	_, err := s.Env.Git().RevParse(context.Background(), ref+"^{commit}")
	return err == nil
}

// Agent implements Checker.
func (s *Sandboxes) Agent(name string) error {
	_, err := agent.Get(name)
	return err
}

// Allow implements Checker. A tasks file is as trusted as the command
// line that names it: its allow entries are --allow's.
func (s *Sandboxes) Allow(entry string) error {
	_, err := egress.ParseAllowEntry(entry, egress.FromFlag)
	return err
}

// Resolve fills in what a task leaves to the moment it is given: the
// base (the current branch now, not when the runner gets to the task)
// and the agent (the config's now). path names the file in messages.
func (s *Sandboxes) Resolve(ctx context.Context, path string, f *File) error {
	cur, err := worktree.CurrentBranch(ctx, s.Env.Git())
	if err != nil {
		return err
	}
	probs := &Problems{Path: path}
	for i := range f.Tasks {
		t := &f.Tasks[i]
		if t.Agent == "" {
			t.Agent = s.Env.Config.Agent
			if t.Agent == "shell" {
				probs.add(t.Line, "[[task]] %d: your config's agent is shell, which needs a command (command = [\"sh\", \"-c\", \"…\"])", i+1)
			}
		}
		if t.Base != "" {
			continue
		}
		if cur == "" {
			return fmt.Errorf("HEAD is detached: give each task a base, or check out the branch the fleet starts from")
		}
		t.Base = cur
	}
	s.checkImage(ctx, f, probs)
	return probs.err()
}

// checkImage names the tasks whose agent's CLI the image lacks, each
// agent asked once: without it every such task would fail to start.
func (s *Sandboxes) checkImage(ctx context.Context, f *File, probs *Problems) {
	said := map[string]error{}
	for i, t := range f.Tasks {
		err, asked := said[t.Agent]
		if !asked {
			err = s.Env.AgentImageProblem(ctx, t.Agent)
			said[t.Agent] = err
		}
		if err == nil {
			continue
		}
		msg := err.Error()
		if ue, ok := usererr.As(err); ok {
			msg = strings.TrimSuffix(ue.Msg, "; nothing was created")
			if len(ue.Hints) > 0 {
				msg += " (" + ue.Hints[0] + ")"
			}
		}
		probs.add(t.Line, "[[task]] %d: %s", i+1, msg)
	}
}

// Start implements the runner's Start: git sandbox start -d with the
// task's settings.
func (s *Sandboxes) Start(ctx context.Context, t Task) error {
	_, err := s.Env.Start(ctx, sandbox.StartOptions{
		Branch: t.Branch, Base: t.Base, Agent: t.Agent, Prompt: t.Prompt, Verify: t.Verify,
		Args: t.Command, Detach: true, Allow: t.Allow, Budget: t.Budget,
		Memory: t.Limits.Memory, CPUs: t.Limits.CPUs, Pids: t.Limits.Pids,
		IO: s.io(),
	})
	return err
}

// Land implements Lander: land with verify on the merged tree.
func (s *Sandboxes) Land(ctx context.Context, branch string) (string, error) {
	sb, err := s.Env.Find(branch)
	if err != nil {
		return "", err
	}
	res, err := land.Land(ctx, sb, land.Request{VerifyMerged: true, Out: s.io().Stderr})
	if err != nil && res != nil && res.Commit != "" {
		// Landed; only the clean-up after it failed. The queue goes on:
		// the base holds the commit, and landing it again would not.
		s.Env.UI.Warnf("%s landed as %s, but: %v", sb.Display(), res.Commit.Short(), err)
		return res.Commit.String(), nil
	}
	if errors.Is(err, land.ErrMoved) {
		return "", errors.Join(ErrMoved, err)
	}
	if err != nil {
		return "", err
	}
	return res.Commit.String(), nil
}

// PerTaskMemory is the largest memory limit a task of f runs with, in
// bytes (0: no limit).
func PerTaskMemory(f *File, cfg *config.Loaded) int64 {
	def, _ := config.MemoryBytes(cfg.Limits.Memory)
	var most int64
	for _, t := range f.Tasks {
		m := def
		if t.Limits.Memory != "" {
			m, _ = config.MemoryBytes(t.Limits.Memory)
		}
		if m == 0 {
			return 0
		}
		most = max(most, m)
	}
	return most
}

// MemAvailable is the kernel's estimate of the memory available for new
// work (MemAvailable in /proc/meminfo), 0 when unknown.
func MemAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// RunnerCommand is the hidden command that runs a fleet's runner.
const RunnerCommand = "__fleet-run"

// SpawnRunner starts the fleet's runner as its own session, detached from
// this process and its terminal (as the supervisor is), writing to the
// fleet's runner.log.
func SpawnRunner(env *sandbox.Env, store *Store, name string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(store.Log(name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	err = proc.SpawnDetached(proc.SpawnOptions{
		Path:   exe,
		Args:   []string{"git-sandbox", RunnerCommand, "--", name},
		Dir:    env.Repo.MainWorkTree,
		Env:    append(os.Environ(), "GIT_SANDBOX_STATE_DIR="+env.Layout.Root),
		Output: logf,
	})
	if err != nil {
		return err
	}
	// Returning once the runner is in charge makes fleet ps and fleet
	// wait right after start see it.
	for end := time.Now().Add(runnerStartWait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		st, err := store.Load(name)
		if err != nil {
			return err
		}
		if st.RunnerPID != 0 {
			return nil
		}
	}
	return fmt.Errorf("the runner did not start within %s (its log: %s)", runnerStartWait, store.Log(name))
}

// runnerStartWait is how long fleet start waits for its runner.
const runnerStartWait = 30 * time.Second
