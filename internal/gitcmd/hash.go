package gitcmd

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Hash is the full, lowercase hexadecimal name of a git object. Repositories
// are SHA-1 (others are refused when opened), so a valid Hash has 40 digits.
// The empty Hash means "no object".
type Hash string

// ZeroHash is the all-zero object name git uses for "no object": as the old
// value of a ref update it means "the ref must not exist yet".
const ZeroHash Hash = "0000000000000000000000000000000000000000"

// hashLen is the length of a SHA-1 object name in hex.
const hashLen = 40

// ParseHash checks that s is a full object name and returns it as a Hash.
func ParseHash(s string) (Hash, error) {
	if len(s) != hashLen {
		return "", fmt.Errorf("not an object name: %q", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", fmt.Errorf("not an object name: %q", s)
		}
	}
	return Hash(s), nil
}

// String returns the full object name.
func (h Hash) String() string { return string(h) }

// Short returns the first 12 digits, the abbreviation every message uses.
func (h Hash) Short() string {
	if len(h) > 12 {
		return string(h[:12])
	}
	return string(h)
}

// IsZero reports whether h names no object: empty or all zeros.
func (h Hash) IsZero() bool { return strings.Trim(string(h), "0") == "" }

// ErrNotExist is returned (wrapped) when a revision names no object.
// Test for it with errors.Is; any other error is a failure to ask.
var ErrNotExist = errors.New("no such object")

func notExist(rev string) error { return fmt.Errorf("%q: %w", rev, ErrNotExist) }

// RevParse resolves a revision (a ref, an object name, rev^{tree}, …) to the
// object it names. A revision that names nothing gives an error satisfying
// errors.Is(err, ErrNotExist). A revision is never taken as an option.
//
// Like git rev-parse --verify, a full 40-digit name is returned as it is,
// whether or not the object exists; peel it (PeelToCommit) to be sure.
func (r *Runner) RevParse(ctx context.Context, rev string) (Hash, error) {
	out, err := r.Run(ctx, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev)
	if err != nil {
		// --verify --quiet exits 1 when the revision names nothing (or,
		// peeled, nothing of the type asked for); anything else (no
		// repository, a broken ref store) is a real failure.
		if ExitCode(err) == 1 {
			return "", notExist(rev)
		}
		return "", err
	}
	return ParseHash(strings.TrimSpace(string(out)))
}

// PeelToCommit resolves rev to the commit it names (a tag is peeled).
func (r *Runner) PeelToCommit(ctx context.Context, rev string) (Hash, error) {
	return r.RevParse(ctx, rev+"^{commit}")
}

// PeelToTree resolves rev to its tree (a commit's tree, or the tree itself).
func (r *Runner) PeelToTree(ctx context.Context, rev string) (Hash, error) {
	return r.RevParse(ctx, rev+"^{tree}")
}

// RevParseMany resolves several revisions with one git process, in order.
// Unlike RevParse every object must exist. When any revision names nothing
// the error satisfies errors.Is(err, ErrNotExist).
func (r *Runner) RevParseMany(ctx context.Context, revs ...string) ([]Hash, error) {
	hashes, err := r.RevParseEach(ctx, revs...)
	if err != nil {
		return nil, err
	}
	for i, h := range hashes {
		if h == "" {
			return nil, notExist(revs[i])
		}
	}
	return hashes, nil
}

// RevParseEach resolves several revisions with one git process, in order;
// a revision that names nothing gets an empty Hash.
func (r *Runner) RevParseEach(ctx context.Context, revs ...string) ([]Hash, error) {
	hashes := make([]Hash, len(revs))
	var in strings.Builder
	var asked []int
	for i, rev := range revs {
		if strings.ContainsAny(rev, "\n\x00") {
			continue
		}
		asked = append(asked, i)
		in.WriteString(rev)
		in.WriteByte('\n')
	}
	if len(asked) == 0 {
		return hashes, nil
	}
	// cat-file resolves each line as a revision; one it cannot resolve
	// comes back as "<rev> missing" (or "ambiguous") instead of a name.
	out, err := r.Run(ctx, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(asked) {
		return nil, fmt.Errorf("git cat-file: %d answers for %d revisions", len(lines), len(asked))
	}
	for k, line := range lines {
		if h, err := ParseHash(line); err == nil {
			hashes[asked[k]] = h
		}
	}
	return hashes, nil
}

// SymbolicFullName returns the full ref name rev stands for
// (refs/heads/main for main), or "" when it names an object but not through
// a ref (a commit id, main~1).
func (r *Runner) SymbolicFullName(ctx context.Context, rev string) (string, error) {
	return r.Output(ctx, "rev-parse", "--symbolic-full-name", "--verify", "--quiet", "--end-of-options", rev)
}

// AbsoluteGitDir returns the runner's git directory as git resolves it
// (a gitfile followed), absolute.
func (r *Runner) AbsoluteGitDir(ctx context.Context) (string, error) {
	return r.Output(ctx, "rev-parse", "--absolute-git-dir")
}

// RepoInfo is what RepositoryInfo reports.
type RepoInfo struct {
	// Bare is set for a repository without a working tree.
	Bare bool
	// ObjectFormat is the hash algorithm of object names: "sha1" or "sha256".
	ObjectFormat string
}

// RepositoryInfo reads whether the repository is bare and which object
// format it uses, with one git process.
func (r *Runner) RepositoryInfo(ctx context.Context) (RepoInfo, error) {
	facts, err := r.Lines(ctx, "rev-parse", "--is-bare-repository", "--show-object-format")
	if err != nil {
		return RepoInfo{}, err
	}
	if len(facts) != 2 {
		return RepoInfo{}, fmt.Errorf("git rev-parse: unexpected output %q", facts)
	}
	return RepoInfo{Bare: facts[0] == "true", ObjectFormat: facts[1]}, nil
}
