package hooks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/config"
	"github.com/git-sandbox/git-sandbox/internal/sandbox"
	"github.com/git-sandbox/git-sandbox/internal/termsafe"
	"github.com/git-sandbox/git-sandbox/internal/ui"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
	"github.com/git-sandbox/git-sandbox/internal/verify"
	"github.com/git-sandbox/git-sandbox/internal/version"
)

// Update is one line git gives a pre-push hook.
type Update struct {
	LocalRef, LocalSHA, RemoteRef, RemoteSHA string
}

// Deletes reports whether the update deletes the remote ref.
func (u Update) Deletes() bool { return strings.Trim(u.LocalSHA, "0") == "" }

// ParseUpdates reads pre-push's standard input.
func ParseUpdates(r io.Reader) ([]Update, error) {
	var out []Update
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 4 {
			return nil, fmt.Errorf("pre-push: unexpected input line %q", sc.Text())
		}
		out = append(out, Update{LocalRef: f[0], LocalSHA: f[1], RemoteRef: f[2], RemoteSHA: f[3]})
	}
	return out, sc.Err()
}

// Refusal is one refused ref and why.
type Refusal struct {
	Ref    string
	Reason string
	Hint   string
}

// Check applies the rules that need no container run: sandbox refs never
// leave; a sandbox branch waits while its agent runs or when its recorded
// verify verdict for the pushed tree failed. Deletions and tags pass.
func Check(ctx context.Context, env *sandbox.Env, updates []Update) []Refusal {
	var refused []Refusal
	for _, u := range updates {
		if u.Deletes() {
			continue
		}
		if strings.HasPrefix(u.LocalRef, "refs/sandbox/") || strings.HasPrefix(u.RemoteRef, "refs/sandbox/") {
			refused = append(refused, Refusal{Ref: u.RemoteRef, Reason: "sandbox refs (snapshots of agents' work) never leave this machine",
				Hint: "push a branch instead; git sandbox rescue restore SNAPSHOT --branch NEW makes one"})
			continue
		}
		if strings.HasPrefix(u.RemoteRef, "refs/tags/") || !strings.HasPrefix(u.LocalRef, "refs/heads/") {
			continue
		}
		branch := strings.TrimPrefix(u.LocalRef, "refs/heads/")
		sb, err := env.Find(branch)
		if err != nil {
			continue
		}
		running, err := sb.Running(ctx)
		if err != nil {
			hint := "start Docker and push again"
			if sb.Record.Engine != "" {
				hint = fmt.Sprintf("make engine %s answer (git sandbox doctor checks it) and push again", termsafe.String(sb.Record.Engine))
			}
			refused = append(refused, Refusal{Ref: u.LocalRef, Reason: "it is a sandbox branch, and whether its agent still runs cannot be told: " + err.Error(),
				Hint: hint})
			continue
		}
		if running {
			refused = append(refused, Refusal{Ref: u.LocalRef, Reason: "its sandbox's agent is still running",
				Hint: fmt.Sprintf("wait for it (git sandbox wait %s) and push again", termsafe.String(branch))})
			continue
		}
		tree, err := env.Git().PeelToTree(ctx, u.LocalSHA)
		if err != nil {
			continue
		}
		if v, ok := sb.Verdict(tree.String()); ok && !v.OK {
			refused = append(refused, Refusal{Ref: u.LocalRef, Reason: fmt.Sprintf("verify failed on this commit's tree (exit code %d)", v.ExitCode),
				Hint: fmt.Sprintf("fix it and run git sandbox verify %s", termsafe.String(branch))})
		}
	}
	return refused
}

// VerifyOptions configure verify-before-push.
type VerifyOptions struct {
	Config *config.Loaded
	// UI receives progress, warnings and a failed run's (escaped) output;
	// nil means the environment's printer.
	UI *ui.Printer
}

// VerifyPushed runs the verify command on exactly each pushed commit, in a
// fresh hardened container on a throwaway copy of the commit's files, and
// returns the refusals. The container and the copy are removed also when
// ctx is cancelled (Ctrl-C).
func VerifyPushed(ctx context.Context, env *sandbox.Env, updates []Update, o VerifyOptions) ([]Refusal, error) {
	cfg := o.Config
	p := o.UI
	if p == nil {
		p = env.UI
	}
	if cfg.Verify == "" {
		p.Warnf("verify_before_push is set but no verify command is configured; pushing unverified")
		return nil, nil
	}
	var todo []Update
	seen := map[string]bool{}
	for _, u := range updates {
		if u.Deletes() || strings.HasPrefix(u.RemoteRef, "refs/tags/") || seen[u.LocalSHA] {
			continue
		}
		seen[u.LocalSHA] = true
		todo = append(todo, u)
	}
	if len(todo) == 0 {
		return nil, nil
	}
	d, err := env.Engine(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := d.ImageExists(ctx, cfg.Image)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, container.ErrImageMissing(cfg.Image, cfg.Image == config.DefaultImage())
	}
	cur, err := sandbox.ConfigSettings(cfg)
	if err != nil {
		return nil, err
	}
	maxBytes, err := sandbox.ExportBudget(cfg)
	if err != nil {
		return nil, err
	}
	var refused []Refusal
	for _, u := range todo {
		if err := os.MkdirAll(env.Layout.RepoDir(), 0o700); err != nil {
			return nil, err
		}
		work, err := os.MkdirTemp(env.Layout.RepoDir(), ".push-verify-")
		if err != nil {
			return nil, err
		}
		// A sandbox branch is verified as strictly as its sandbox runs.
		set := cur
		if b, ok := strings.CutPrefix(u.LocalRef, "refs/heads/"); ok {
			sb, err := env.Find(b)
			switch {
			case err == nil:
				set = cur.Stricter(sb.Record)
			case !errors.Is(err, sandbox.ErrNotFound):
				return nil, err
			}
		}
		name := container.Name(env.Repo.ID, env.Repo.Name, "push-verify-"+u.LocalSHA[:12])
		network, netName, netEnv, cleanup, err := env.VerifyNetwork(ctx, d, name, "push-verify-"+u.LocalSHA[:12], cfg.Image, set, work)
		if err != nil {
			_ = os.RemoveAll(work)
			return nil, err
		}
		p.Infof("verifying %s (%s) before the push: %s", termsafe.String(u.LocalRef), u.LocalSHA[:12], termsafe.String(cfg.Verify))
		var output strings.Builder
		code, err := verify.Run(ctx, verify.Options{
			Engine:    d,
			CommonDir: env.Repo.CommonDir,
			Tree:      u.LocalSHA,
			Command:   cfg.Verify,
			Image:     cfg.Image,
			Name:      name,
			Labels: map[string]string{
				container.LabelManaged: "1", container.LabelRepo: env.Repo.ID,
				container.LabelRole: container.RoleVerify, container.LabelVersion: version.Version,
			},
			Network:     network,
			NetworkName: netName,
			Env:         netEnv,
			Runtime:     set.Runtime,
			Limits:      set.Limits,
			UID:         os.Getuid(),
			GID:         os.Getgid(),
			WorkDir:     work,
			MaxBytes:    maxBytes,
			Stdout:      &output,
			Stderr:      &output,
		})
		cleanup()
		if err != nil {
			return nil, err
		}
		if code != 0 {
			fmt.Fprint(p.Writer(), termsafe.Text(output.String()))
			refused = append(refused, Refusal{Ref: u.LocalRef,
				Reason: fmt.Sprintf("verify failed on the pushed commit %s (exit code %d; output above)", u.LocalSHA[:12], code),
				Hint:   "fix the commit and push again"})
		}
	}
	return refused, nil
}

// RefusalError turns refusals into the error the hook exits with.
func RefusalError(refused []Refusal) error {
	if len(refused) == 0 {
		return nil
	}
	var lines []string
	e := usererr.New("push refused").WithCode(usererr.ExitRefused)
	for _, r := range refused {
		lines = append(lines, fmt.Sprintf("%s: %s", termsafe.String(r.Ref), r.Reason))
		if r.Hint != "" {
			e.Hint("%s", r.Hint)
		}
	}
	e.Msg = "push refused: " + strings.Join(lines, "; ")
	return e
}
