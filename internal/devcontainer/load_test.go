package devcontainer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/gitcmd"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// testRepo is a real repository whose commits tests make from file maps.
type testRepo struct {
	t   *testing.T
	dir string
	g   *gitcmd.Runner
}

func newRepo(t *testing.T) *testRepo {
	t.Helper()
	dir := t.TempDir()
	r := &testRepo{t: t, dir: dir, g: &gitcmd.Runner{
		GitDir:   filepath.Join(dir, ".git"),
		WorkTree: dir,
		Env: []string{
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		},
	}}
	r.git("init", "-q")
	return r
}

func (r *testRepo) git(args ...string) string {
	r.t.Helper()
	out, err := r.g.Output(context.Background(), args...)
	if err != nil {
		r.t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// commit writes files ("link:" makes a symbolic link, "exec:" an
// executable, "" removes the file) and commits everything.
func (r *testRepo) commit(files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, filepath.FromSlash(name))
		_ = os.RemoveAll(p)
		if content == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(content, "link:"):
			err = os.Symlink(strings.TrimPrefix(content, "link:"), p)
		case strings.HasPrefix(content, "exec:"):
			err = os.WriteFile(p, []byte(strings.TrimPrefix(content, "exec:")), 0o755)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "--allow-empty", "-m", "c")
	return r.git("rev-parse", "HEAD")
}

func (r *testRepo) load(commit string) (*Config, error) {
	return Load(context.Background(), Source{Git: r.g, Commit: commit})
}

func TestLoadFindsTheFileInTheCommitNotTheCheckout(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	none := r.commit(map[string]string{"README": "x"})
	if c, err := r.load(none); c != nil || err != nil {
		t.Fatalf("no devcontainer: %v, %v", c, err)
	}
	top := r.commit(map[string]string{".devcontainer.json": `{"image": "top"}`})
	if c, err := r.load(top); err != nil || c.Image != "top" || c.Path != ".devcontainer.json" {
		t.Fatalf("top-level file: %+v, %v", c, err)
	}
	both := r.commit(map[string]string{".devcontainer/devcontainer.json": `{"image": "folder"}`})
	if c, err := r.load(both); err != nil || c.Image != "folder" || c.Path != ".devcontainer/devcontainer.json" {
		t.Fatalf("the folder's file comes first: %+v, %v", c, err)
	}
	// An uncommitted edit in the checkout plays no part.
	if err := os.WriteFile(filepath.Join(r.dir, ".devcontainer", "devcontainer.json"), []byte(`{"image": "edited"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, _ := r.load(both); c.Image != "folder" {
		t.Errorf("read from the checkout: %q", c.Image)
	}
	if c, _ := r.load(top); c.Image != "top" {
		t.Errorf("older commit: %q", c.Image)
	}
	// A submodule at .devcontainer holds nothing of this commit's tree.
	r.git("rm", "-rqf", ".devcontainer", ".devcontainer.json")
	r.git("update-index", "--add", "--cacheinfo", "160000,"+top+",.devcontainer")
	r.git("commit", "-q", "-m", "submodule")
	if c, err := r.load(r.git("rev-parse", "HEAD")); c != nil || err != nil {
		t.Errorf("a .devcontainer submodule: %+v, %v", c, err)
	}
	if _, err := r.load("-x"); err == nil {
		t.Error("an option taken for a commit")
	}
}

func TestLoadResolvesBuildPathsInTheTree(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	c, err := r.load(r.commit(map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": ".."}}`,
		".devcontainer/Dockerfile":        "FROM x\n",
		"tools/Dockerfile.dev":            "FROM y\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Build; b.Dockerfile != ".devcontainer/Dockerfile" || b.Context != "." || b.ContextTree == "" || b.DockerfileBlob == "" {
		t.Errorf("build = %+v", b)
	}
	if root := r.git("rev-parse", "HEAD^{tree}"); c.Build.ContextTree != root {
		t.Errorf("context tree %s, want the root %s", c.Build.ContextTree, root)
	}
	// The default context is the file's folder; links inside the tree are
	// followed.
	c, err = r.load(r.commit(map[string]string{
		".devcontainer/devcontainer.json": `{"build": {"dockerfile": "../dev/Dockerfile.dev"}}`,
		"dev":                             "link:tools",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Build; b.Dockerfile != "tools/Dockerfile.dev" || b.Context != ".devcontainer" {
		t.Errorf("build = %+v", b)
	}
	// The file itself may be a link inside the tree; paths are relative to
	// where it was found.
	c, err = r.load(r.commit(map[string]string{
		".devcontainer/devcontainer.json": "",
		".devcontainer.json":              "link:tools/dc.json",
		"tools/dc.json":                   `{"build": {"dockerfile": "tools/Dockerfile.dev"}}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != ".devcontainer.json" || c.Build.Dockerfile != "tools/Dockerfile.dev" || c.Build.Context != "." {
		t.Errorf("linked file: %+v %+v", c, c.Build)
	}
}

func TestLoadRefusesPathsOutOfTheRepository(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		files map[string]string
		want  string
	}{
		"dotdot above the root": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "../.."}}`,
			".devcontainer/Dockerfile":        "FROM x",
		}, "leads out of the repository"},
		"dockerfile above the root": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "../../../etc/passwd"}}`,
		}, "leads out of the repository"},
		"link to an absolute path": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
			".devcontainer/Dockerfile":        "link:/etc/passwd",
		}, "leads out of the repository"},
		"link up and out": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "ctx"}}`,
			".devcontainer/Dockerfile":        "FROM x",
			".devcontainer/ctx":               "link:../../outside",
		}, "leads out of the repository"},
		"the file itself links out": {map[string]string{
			".devcontainer.json": "link:../../../home/user/.devcontainer.json",
		}, "leads out of the repository"},
		"link loop": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "a"}}`,
			".devcontainer/a":                 "link:b",
			".devcontainer/b":                 "link:a",
		}, "too many levels of symbolic links"},
		"missing dockerfile": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile"}}`,
		}, "is not in the repository at this commit"},
		"context is a file": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile", "context": "Dockerfile"}}`,
			".devcontainer/Dockerfile":        "FROM x",
		}, "is not a directory"},
		"dockerfile is a directory": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "."}}`,
		}, "is not a file"},
		"through a file": {map[string]string{
			".devcontainer/devcontainer.json": `{"build": {"dockerfile": "Dockerfile/x"}}`,
			".devcontainer/Dockerfile":        "FROM x",
		}, "goes through a file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newRepo(t)
			_, err := r.load(r.commit(c.files))
			if err == nil {
				t.Fatal("accepted")
			}
			if _, ok := usererr.As(err); !ok || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q (user error %v), want %q", err, ok, c.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	commit := r.commit(map[string]string{
		"a/b/c.txt": "x",
		"a/up":      "link:..",
		"a/self":    "link:.",
		"link-to-b": "link:a/b",
	})
	tr, err := openTree(context.Background(), r.g, commit)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"a/b/c.txt":                "a/b/c.txt",
		"./a//b/./c.txt":           "a/b/c.txt",
		"a/up/a/b/c.txt":           "a/b/c.txt",
		"a/self/self/b/c.txt":      "a/b/c.txt",
		"link-to-b/c.txt":          "a/b/c.txt",
		"link-to-b/../b/../../a":   "a",
		"a/b/../../link-to-b/..":   "a",
		".":                        ".",
		"":                         ".",
		"a/up/a/up/a/up/link-to-b": "a/b",
	} {
		got, _, err := tr.resolve(context.Background(), in)
		if err != nil || got != want {
			t.Errorf("resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]error{
		"nope":               fs.ErrNotExist,
		"a/b/c.txt/d":        errNotDir,
		"..":                 errEscapes,
		"a/../..":            errEscapes,
		"a/up/..":            errEscapes,
		"/a":                 errAbsolute,
		"link-to-b/../../..": errEscapes,
	} {
		if _, _, err := tr.resolve(context.Background(), in); !errors.Is(err, want) {
			t.Errorf("resolve(%q): %v, want %v", in, err, want)
		}
	}
}
