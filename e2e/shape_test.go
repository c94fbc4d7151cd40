package e2e

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// historyShape is the shape of a generated repository with a long history
// of small changes, like tldr-pages/tldr (38,000 files, 23,000 commits,
// about 216,000 objects): pages in language directories, each with
// platform directories; every commit edits a few pages and adds one.
type historyShape struct {
	// Files is how many files the last commit has, Commits how many
	// commits lead to it.
	Files, Commits int
}

// tldrShape is tldr-pages/tldr's shape, generated (no network).
var tldrShape = historyShape{Files: 38_000, Commits: 23_000}

var (
	langs     = []string{"pages", "pages.de", "pages.es", "pages.fr", "pages.it", "pages.ja", "pages.ko", "pages.nl", "pages.pl", "pages.pt_BR", "pages.ru", "pages.sv", "pages.tr", "pages.uk", "pages.zh", "pages.id", "pages.hi", "pages.fa", "pages.ar", "pages.bn"}
	platforms = []string{"common", "linux", "osx", "windows", "android", "freebsd", "openbsd", "sunos", "netbsd", "cisco-ios"}
)

// page is the text of one generated page, version v.
func page(r *rand.Rand, name string, v int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n> Does something useful (revision %d).\n> More information: <https://example.org/%s>.\n", name, v, name)
	for i := 0; i < 4+r.Intn(4); i++ {
		fmt.Fprintf(&b, "\n- Example %d of %s, with option %d:\n\n`%s --flag-%d {{path/to/file%d}}`\n", i, name, r.Intn(1000), name, r.Intn(100), i)
	}
	return b.String()
}

// genHistory writes the shape's history into the repository at dir (made
// with git init) as branch main with git fast-import, then packs it as a
// clone's would be, and checks it out.
func genHistory(t testing.TB, dir string, shape historyShape) {
	t.Helper()
	r := rand.New(rand.NewSource(int64(shape.Files)*31 + int64(shape.Commits)))
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	in, err := cmd.StdinPipe()
	must(t, err)
	cmd.Stderr = os.Stderr
	must(t, cmd.Start())
	w := bufio.NewWriterSize(in, 1<<20)
	initial := shape.Files - shape.Commits
	if initial < 1 {
		initial = 1
	}
	var paths []string
	versions := map[string]int{}
	newPath := func() string {
		n := len(paths)
		p := fmt.Sprintf("%s/%s/cmd-%05d.md", langs[n%len(langs)], platforms[(n/len(langs))%len(platforms)], n)
		paths = append(paths, p)
		return p
	}
	blob := func(p string) {
		versions[p]++
		text := page(r, filepath.Base(p), versions[p])
		fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", p, len(text), text)
	}
	when := int64(1_300_000_000)
	for c := 0; c < shape.Commits; c++ {
		when += 3600
		msg := fmt.Sprintf("commit %d", c)
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Gen <gen@example.org> %d +0000\ndata %d\n%s\n", when, len(msg), msg)
		if c == 0 {
			for i := 0; i < initial; i++ {
				blob(newPath())
			}
		} else {
			blob(newPath())
			for i := 0; i < 1+r.Intn(3); i++ {
				blob(paths[r.Intn(len(paths))])
			}
		}
		fmt.Fprintln(w)
	}
	must(t, w.Flush())
	must(t, in.Close())
	must(t, cmd.Wait())
	runOK(t, dir, nil, "git", "-c", "gc.auto=0", "repack", "-adq")
	runOK(t, dir, nil, "git", "checkout", "-q", "-f", "main")
}

var (
	historyOnce  sync.Map // shape → *sync.Once
	historyRepos sync.Map // shape → template directory
)

// historyRepo fills the test repository with the shape's history
// (generated once per test binary, then copied).
func historyRepo(t testing.TB, e *Env, shape historyShape) {
	t.Helper()
	once, _ := historyOnce.LoadOrStore(shape, &sync.Once{})
	once.(*sync.Once).Do(func() {
		dir, err := os.MkdirTemp("", "git-sandbox-e2e-history-")
		must(t, err)
		runOK(t, dir, e.vars, "git", "init", "-q", "-b", "main")
		genHistory(t, dir, shape)
		historyRepos.Store(shape, dir)
	})
	v, ok := historyRepos.Load(shape)
	if !ok {
		t.Fatal("the generated history is missing (its generation failed)")
	}
	tmpl := v.(string)
	must(t, os.RemoveAll(filepath.Join(e.Repo, ".git")))
	runOK(t, "", nil, "cp", "-a", filepath.Join(tmpl, ".git"), filepath.Join(e.Repo, ".git"))
	e.Git("reset", "-q", "--hard", "main")
	e.Git("clean", "-qfdx")
}

// removeHistories removes the generated histories (at the end of the
// test binary).
func removeHistories() {
	historyRepos.Range(func(_, v any) bool {
		_ = os.RemoveAll(v.(string))
		return true
	})
}
