package gitcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Signature is who made a commit, and when.
type Signature struct {
	// Name and Email identify the person.
	Name, Email string
	// When is the time recorded; the zero time means now.
	When time.Time
}

// env is the GIT_<role>_* environment for the signature.
func (s *Signature) env(role string) []string {
	env := []string{"GIT_" + role + "_NAME=" + s.Name, "GIT_" + role + "_EMAIL=" + s.Email}
	if !s.When.IsZero() {
		env = append(env, fmt.Sprintf("GIT_%s_DATE=%d %s", role, s.When.Unix(), s.When.Format("-0700")))
	}
	return env
}

// CommitTreeRequest describes a commit to write.
type CommitTreeRequest struct {
	// Tree is the commit's tree. Required.
	Tree Hash
	// Parents are the parent commits, first parent first; none makes a
	// root commit.
	Parents []Hash
	// Message is the whole commit message.
	Message string
	// Author and Committer, when set, replace the identity and time git
	// would take from the configuration and the clock.
	Author, Committer *Signature
	// Sign signs the commit as git commit -S would: with user.signingKey
	// (or the committer's identity) in gpg.format, by the program the
	// user's configuration names.
	Sign bool
}

// CommitTree writes a commit object (no ref moves) and returns its name.
func (r *Runner) CommitTree(ctx context.Context, req CommitTreeRequest) (Hash, error) {
	if req.Tree.IsZero() {
		return "", fmt.Errorf("commit-tree: no tree")
	}
	args := []string{"commit-tree", req.Tree.String()}
	for _, p := range req.Parents {
		args = append(args, "-p", p.String())
	}
	if req.Sign {
		args = append(args, "-S")
	}
	g := r
	if req.Author != nil || req.Committer != nil {
		c := *r
		c.Env = append([]string(nil), r.Env...)
		if req.Author != nil {
			c.Env = append(c.Env, req.Author.env("AUTHOR")...)
		}
		if req.Committer != nil {
			c.Env = append(c.Env, req.Committer.env("COMMITTER")...)
		}
		g = &c
	}
	out, err := g.Run(ctx, strings.NewReader(req.Message), args...)
	if err != nil {
		return "", err
	}
	return ParseHash(strings.TrimSpace(string(out)))
}

// ReadTreeRequest describes a read of a tree into the index.
type ReadTreeRequest struct {
	// Tree is the tree-ish the index gets. Required.
	Tree string
	// From, when set, makes it a two-tree merge (read-tree -m From Tree):
	// only what differs between From and Tree changes, local changes
	// elsewhere are kept, and a local change in the way fails the whole
	// read with nothing changed.
	From string
	// Update also writes what changes to the work tree (-u); needs From.
	Update bool
}

// ReadTree reads a tree into the runner's index (and work tree, with
// Update).
func (r *Runner) ReadTree(ctx context.Context, req ReadTreeRequest) error {
	if req.Update && req.From == "" {
		return fmt.Errorf("read-tree: updating the work tree needs the tree it is at")
	}
	for _, t := range []string{req.Tree, req.From} {
		if strings.HasPrefix(t, "-") {
			return fmt.Errorf("read-tree: %q is not a tree", t)
		}
	}
	if req.Tree == "" {
		return fmt.Errorf("read-tree: no tree")
	}
	args := []string{"read-tree"}
	if req.From != "" {
		args = append(args, "-m")
		if req.Update {
			args = append(args, "-u")
		}
		args = append(args, req.From)
	}
	_, err := r.Run(ctx, nil, append(args, req.Tree)...)
	return err
}

// Alternates lists the object stores an object directory borrows from
// (objects/info/alternates: a clone made with --reference or --shared),
// as absolute paths. It reads the file only; no git runs.
func Alternates(objects string) []string {
	b, err := os.ReadFile(filepath.Join(objects, "info", "alternates"))
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(objects, line)
		}
		out = append(out, filepath.Clean(line))
	}
	return out
}
