package verify

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

// repoWithFiles makes a repository holding one commit of files (path ->
// content) and returns its git directory and the commit.
func repoWithFiles(t *testing.T, files map[string]string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("add", "-A")
	run("commit", "-q", "-m", "x")
	return filepath.Join(dir, ".git"), run("rev-parse", "HEAD")
}

// tarNames reads a tar stream's regular files (name -> content).
func tarNames(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Errorf("read the archive: %v", err)
			return out
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

// TestRunInVolumes: on an engine that cannot see this machine's files the
// tree reaches the container as a tar on its stdin, into volumes of the
// run's own that are opened to its user first (on an engine whose new
// volumes are root's) and removed with the container afterwards.
func TestRunInVolumes(t *testing.T) {
	common, tree := repoWithFiles(t, map[string]string{"Makefile": "check:\n\ttrue\n", "src/a.go": "package a\n"})
	for _, writable := range []bool{false, true} {
		t.Run(map[bool]string{false: "volumes are root's", true: "volumes are writable"}[writable], func(t *testing.T) {
			f := enginefake.New("img")
			f.VolumesWritable = writable
			var got map[string]string
			var prep, main []container.Spec
			f.OnStart = func(c enginefake.Container) (int, bool) {
				if c.Name == "v1-prep" {
					prep = append(prep, c.Spec)
					return 0, true
				}
				main = append(main, c.Spec)
				return 0, false
			}
			f.Process = func(ctx context.Context, c enginefake.Container, stdin io.Reader, stdout, stderr io.Writer) int {
				got = tarNames(t, stdin)
				io.WriteString(stdout, "checked\x1b[2J\n")
				return 7
			}
			o := options(t, f, common, tree)
			var out strings.Builder
			o.Stdout, o.Volumes = &out, true
			code, err := Run(context.Background(), o)
			if err != nil || code != 7 {
				t.Fatalf("Run = %d, %v; want the command's 7", code, err)
			}
			if got["Makefile"] != "check:\n\ttrue\n" || got["src/a.go"] != "package a\n" {
				t.Errorf("the container read %q from its stdin", got)
			}
			if out.String() != "checked\\x1b[2J\n" {
				t.Errorf("output %q: not escaped", out.String())
			}
			if len(main) != 1 {
				t.Fatalf("%d verify containers started", len(main))
			}
			s := main[0]
			if !s.OpenStdin || !s.StdinOnce || s.Argv[0] != "/bin/sh" || s.Argv[2] != loader || s.Argv[4] != "make check" {
				t.Errorf("verify container: stdin %v/%v argv %q", s.OpenStdin, s.StdinOnce, s.Argv)
			}
			var targets []string
			for _, m := range s.Mounts {
				if !m.Volume || !strings.HasPrefix(m.Source, "v1-") {
					t.Errorf("mount %+v is not a volume of the run", m)
				}
				targets = append(targets, m.Target)
			}
			if !slices.Equal(targets, []string{container.Workspace, container.Home}) {
				t.Errorf("mount targets %q", targets)
			}
			if writable != (len(prep) == 0) {
				t.Errorf("writable volumes %v: %d preparing containers", writable, len(prep))
			}
			if len(prep) == 1 && (prep[0].User != "0:0" || prep[0].Network != container.NetworkNone || prep[0].Argv[0] != "chmod") {
				t.Errorf("preparing container %+v", prep[0])
			}
			if n := len(f.Containers()); n != 0 {
				t.Errorf("%d containers left", n)
			}
			if vols, _ := f.ListVolumes(context.Background()); len(vols) != 0 {
				t.Errorf("volumes left: %+v", vols)
			}
		})
	}
}

func TestRunInVolumesFailures(t *testing.T) {
	common, tree := repoWithFiles(t, map[string]string{"Makefile": "check:\n"})
	tests := []struct {
		name  string
		setup func(f *enginefake.Engine, o *Options)
		want  string
	}{
		{"a volume cannot be made", func(f *enginefake.Engine, o *Options) {
			f.FailOnce("CreateVolume", errors.New("disk full"))
		}, "disk full"},
		{"the second volume cannot be made", func(f *enginefake.Engine, o *Options) {
			f.OnCall = func(c enginefake.Call) {
				if c.Method == "CreateVolume" && strings.HasSuffix(c.Target, "-home") {
					f.FailOnce("CreateVolume", errors.New("quota"))
				}
			}
		}, "quota"},
		{"the volumes cannot be opened", func(f *enginefake.Engine, o *Options) {
			f.OnStart = func(c enginefake.Container) (int, bool) { return 1, true }
		}, "prepare volumes: exit 1"},
		{"files of this machine asked for", func(f *enginefake.Engine, o *Options) {
			o.Mounts = []container.Mount{{Source: "/x", Target: "/x"}}
		}, "its engine cannot see them"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := enginefake.New("img")
			o := options(t, f, common, tree)
			o.Volumes = true
			tt.setup(f, &o)
			code, err := Run(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %d, %v; want an error with %q", code, err, tt.want)
			}
			if n := len(f.Containers()); n != 0 {
				t.Errorf("%d containers left", n)
			}
			if vols, _ := f.ListVolumes(context.Background()); len(vols) != 0 {
				t.Errorf("volumes left: %+v", vols)
			}
			if _, err := os.Stat(o.WorkDir); !os.IsNotExist(err) {
				t.Errorf("work directory left: %v", err)
			}
		})
	}
}

// TestExportBudget: a tree whose files total more than the budget is
// refused before anything is written, naming the largest file; one
// within it is written.
func TestExportBudget(t *testing.T) {
	common, tree := repoWithFiles(t, map[string]string{"small": "x", "big\x1b[2J.bin": strings.Repeat("b", 4000)})
	dir := t.TempDir()
	err := Export(context.Background(), common, tree, dir, t.TempDir(), 1000)
	if usererr.Code(err) != usererr.ExitRefused || !strings.Contains(err.Error(), `big\x1b[2J.bin`) {
		t.Fatalf("Export over the budget = %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files written although refused: %v", entries)
	}
	if _, _, err := Archive(context.Background(), common, tree, t.TempDir(), 1000); usererr.Code(err) != usererr.ExitRefused {
		t.Errorf("Archive over the budget = %v", err)
	}
	if err := Export(context.Background(), common, tree, dir, t.TempDir(), 1<<20); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "small")); err != nil || string(b) != "x" {
		t.Errorf("small = %q, %v", b, err)
	}
	if err := Export(context.Background(), common, strings.Repeat("0", 40), t.TempDir(), t.TempDir(), 1000); err == nil {
		t.Error("Export of a missing tree gave no error")
	}
}

func TestArchive(t *testing.T) {
	common, tree := repoWithFiles(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	scratch := t.TempDir()
	r, wait, err := Archive(context.Background(), common, tree, scratch, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := tarNames(t, r)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a.txt"] != "a\n" || got["d/b.txt"] != "b\n" {
		t.Errorf("archive holds %q", got)
	}
	if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
		t.Errorf("scratch left after wait: %v", entries)
	}
	r, wait, err = Archive(context.Background(), common, strings.Repeat("0", 40), scratch, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	if err := wait(); err == nil || !strings.Contains(err.Error(), "git archive") {
		t.Errorf("wait of a missing tree's archive = %v", err)
	}
	if _, _, err := Archive(context.Background(), common, tree, filepath.Join(scratch, "missing", "dir"), 0); err == nil {
		t.Error("Archive into a missing scratch parent gave no error")
	}
}

// TestPrepareAndCollect: Prepare sees the written tree before the run,
// Collect the files and the exit code after it; their errors end the run.
func TestPrepareAndCollect(t *testing.T) {
	common, tree := repoWithFiles(t, map[string]string{"Makefile": "check:\n"})
	f := enginefake.New("img")
	f.OnStart = func(c enginefake.Container) (int, bool) {
		for _, m := range c.Spec.Mounts {
			if m.Target == container.Workspace {
				os.WriteFile(filepath.Join(m.Source, "report.xml"), []byte("<ok/>"), 0o644)
			}
		}
		return 3, true
	}
	o := options(t, f, common, tree)
	var prepared, collected string
	var collectedCode int
	o.Prepare = func(files string) error {
		b, err := os.ReadFile(filepath.Join(files, "Makefile"))
		prepared = string(b)
		return err
	}
	o.Collect = func(files string, code int) error {
		b, _ := os.ReadFile(filepath.Join(files, "report.xml"))
		collected, collectedCode = string(b), code
		return nil
	}
	if code, err := Run(context.Background(), o); err != nil || code != 3 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if prepared != "check:\n" || collected != "<ok/>" || collectedCode != 3 {
		t.Errorf("prepared %q, collected %q with %d", prepared, collected, collectedCode)
	}
	o = options(t, f, common, tree)
	o.Collect = func(string, int) error { return errors.New("report unreadable") }
	if code, err := Run(context.Background(), o); err == nil || code != 3 {
		t.Errorf("a failing Collect: %d, %v", code, err)
	}
	o = options(t, f, common, tree)
	o.Prepare = func(string) error { return errors.New("cannot prepare") }
	if _, err := Run(context.Background(), o); err == nil || f.Count("Create") != 2 {
		t.Errorf("a failing Prepare: %v, %d creates (want no third)", err, f.Count("Create"))
	}
}

func TestRunEndedByItsContext(t *testing.T) {
	common, tree := repoWithFiles(t, map[string]string{"Makefile": "check:\n"})
	f := enginefake.New("img")
	ctx, cancel := context.WithCancel(context.Background())
	f.OnStart = func(c enginefake.Container) (int, bool) {
		cancel()
		return 0, false
	}
	o := options(t, f, common, tree)
	if _, err := Run(ctx, o); !errors.Is(err, context.Canceled) {
		t.Errorf("Run whose context ended = %v, want context.Canceled", err)
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left", n)
	}
}

// TestRunInVolumesNeedsTheWholeTree: when git archive dies part way (a
// blob missing from the object store) it has written whole blocks of
// 10 KiB; where one ends at an entry's end the container reads a tar that
// tar extracts without a word (GNU tar exits 0). A command that then
// passes on the part it got must not make the run pass. Here the pax
// header (1 KiB), a.txt's header and its 8.5 KiB fill the first block
// exactly, and z.txt's blob is gone.
func TestRunInVolumesNeedsTheWholeTree(t *testing.T) {
	first := strings.Repeat("a", 8704)
	common, tree := repoWithFiles(t, map[string]string{"a.txt": first, "z.txt": "last, and lost\n"})
	blob := strings.TrimSpace(gitOut(t, common, "rev-parse", tree+":z.txt"))
	if err := os.Remove(filepath.Join(common, "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}
	f := enginefake.New("img")
	f.VolumesWritable = true
	var got map[string]string
	f.Process = func(ctx context.Context, c enginefake.Container, stdin io.Reader, stdout, stderr io.Writer) int {
		got = tarNames(t, stdin)
		return 0
	}
	o := options(t, f, common, tree)
	o.Volumes = true
	code, err := Run(context.Background(), o)
	if got["a.txt"] != first || len(got) != 1 {
		t.Fatalf("the container read %q: the test needs a tree cut after a.txt", got)
	}
	if err == nil || code == 0 {
		t.Errorf("Run = %d, %v: a run on part of the tree passed", code, err)
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left", n)
	}
}

// gitOut runs git on the git directory gitDir.
func gitOut(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir", gitDir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}
