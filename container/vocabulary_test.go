package container

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/git-sandbox/git-sandbox/internal/usererr"
)

func TestErrorKinds(t *testing.T) {
	base := errors.New("no such container: c1")
	tests := []struct {
		name                             string
		err                              error
		notFound, conflict, notSupported bool
	}{
		{"not found", WithKind(ErrNotFound, base), true, false, false},
		{"conflict", WithKind(ErrConflict, base), false, true, false},
		{"wrapped", fmt.Errorf("start: %w", WithKind(ErrConflict, base)), false, true, false},
		{"not supported", NotSupported("a cluster cannot %s", "build"), false, false, true},
		{"plain", base, false, false, false},
	}
	for _, tt := range tests {
		if IsNotFound(tt.err) != tt.notFound || IsConflict(tt.err) != tt.conflict || IsNotSupported(tt.err) != tt.notSupported {
			t.Errorf("%s: NotFound %v Conflict %v NotSupported %v", tt.name, IsNotFound(tt.err), IsConflict(tt.err), IsNotSupported(tt.err))
		}
	}
	k := WithKind(ErrNotFound, base)
	if k.Error() != base.Error() || !errors.Is(k, base) {
		t.Errorf("WithKind lost the engine's error: %q", k)
	}
	ns := NotSupported("a cluster cannot %s", "build images").Hint("build with docker")
	if ue, ok := usererr.As(ns); !ok || ue.Msg != "a cluster cannot build images" || len(ue.Hints) != 1 {
		t.Errorf("NotSupported = %#v", ns)
	}
}

func TestErrImageMissing(t *testing.T) {
	for _, isDefault := range []bool{true, false} {
		ue, ok := usererr.As(ErrImageMissing("img:1", isDefault))
		if !ok || ue.Msg != "image img:1 is not present" || len(ue.Hints) != 1 {
			t.Fatalf("ErrImageMissing = %#v", ue)
		}
		if got := strings.Contains(ue.Hints[0], "by removing the image setting"); got == isDefault {
			t.Errorf("default %v: hint %q", isDefault, ue.Hints[0])
		}
	}
}

func TestSplitAgents(t *testing.T) {
	tests := map[string][]string{
		"":                nil,
		" , ":             nil,
		"claude":          {"claude"},
		"claude, codex ,": {"claude", "codex"},
	}
	for in, want := range tests {
		if got := SplitAgents(in); !slices.Equal(got, want) {
			t.Errorf("SplitAgents(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDockerfileContext(t *testing.T) {
	df := LayerDockerfile()
	if !strings.Contains(string(df), "ARG BASE") || !strings.Contains(string(df), "AGENT_PACKAGES") {
		t.Fatalf("the layer's Dockerfile lacks its build arguments:\n%s", df)
	}
	df[0] ^= 0xff // a copy: changing it changes nothing of the package's
	if LayerDockerfile()[0] == df[0] {
		t.Error("LayerDockerfile hands out the package's own bytes")
	}
	tr := tar.NewReader(DockerfileContext([]byte("FROM scratch\n")))
	h, err := tr.Next()
	if err != nil || h.Name != "Dockerfile" || h.Size != int64(len("FROM scratch\n")) {
		t.Fatalf("first entry %+v, %v", h, err)
	}
	b, _ := io.ReadAll(tr)
	if string(b) != "FROM scratch\n" {
		t.Errorf("content %q", b)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("more than the Dockerfile in the context: %v", err)
	}
}

func TestCloneSharesNothing(t *testing.T) {
	s := validSpec()
	s.Argv, s.Env, s.Labels = []string{"sh"}, []string{"A=1"}, map[string]string{"k": "v"}
	c := s.Clone()
	c.Argv[0], c.Env[0], c.Mounts[0].Source, c.CapDrop[0], c.Security[0] = "x", "x", "x", "x", "x"
	c.Labels["k"] = "x"
	if s.Argv[0] != "sh" || s.Env[0] != "A=1" || s.Mounts[0].Source != "/a" || s.CapDrop[0] != "ALL" || s.Security[0] != "no-new-privileges" || s.Labels["k"] != "v" {
		t.Errorf("the clone shares with its original: %+v", s)
	}
	if c.Name != s.Name || c.Limits != s.Limits {
		t.Errorf("the clone lost fields: %+v", c)
	}
}

func TestSortedLabels(t *testing.T) {
	if got := SortedLabels(map[string]string{"b": "", "a": "", "c": ""}); strings.Join(got, ",") != "a,b,c" {
		t.Errorf("SortedLabels = %q", got)
	}
	if got := SortedLabels(nil); len(got) != 0 {
		t.Errorf("SortedLabels(nil) = %q", got)
	}
}

func TestCacheVolumeNames(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)
	long := strings.Repeat("r", 80)
	names := map[string]string{}
	add := func(what, name string) {
		t.Helper()
		if !valid.MatchString(name) || len(name) > 128 {
			t.Errorf("%s: %q is not a valid volume name", what, name)
		}
		if other, ok := names[name]; ok {
			t.Errorf("%s and %s share the volume %q", what, other, name)
		}
		names[name] = what
	}
	add("npm", CacheVolume("repo-1", "/home/u/.npm"))
	add("npm of another repo", CacheVolume("repo-2", "/home/u/.npm"))
	add("go", CacheVolume("repo-1", "/go/pkg/mod"))
	add("long", CacheVolume(long, "/x/"+long))
	add("odd", CacheVolume(".repo with spaces", "/a b/..c"))
	add("repo cache", RepoCacheVolume("repo-1", "npm"))
	add("repo cache of another repo", RepoCacheVolume("repo-2", "npm"))
	add("long repo cache", RepoCacheVolume(long, long))
	if CacheVolume("repo-1", "/home/u/.npm/") != CacheVolume("repo-1", "/home/u/.npm") {
		t.Error("one target, two names")
	}
	if !strings.HasPrefix(CacheVolume("repo-1", "/home/u/.npm"), "git-sandbox-cache-repo-1-npm-") {
		t.Errorf("CacheVolume is not readable: %q", CacheVolume("repo-1", "/home/u/.npm"))
	}
}

func TestFreeLoopbackPort(t *testing.T) {
	p, err := FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(Loopback, strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("port %d is not free: %v", p, err)
	}
	l.Close()
}

func TestRefuseDaemonSockets(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", filepath.Join(dir, "home"))
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	plain := filepath.Join(dir, "notes.sock")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path   string
		refuse bool
	}{
		{sock, true},
		{filepath.Join(dir, "docker.sock"), true}, // refused by name, even before it exists
		{plain, false}, // a file named .sock is no socket
		{filepath.Join(dir, "new", "dir"), false},
	}
	for _, tt := range tests {
		got, err := RefuseUnsafeHostPath("workspace", tt.path)
		if (err != nil) != tt.refuse {
			t.Errorf("RefuseUnsafeHostPath(%q) = %q, %v; want refusal %v", tt.path, got, err, tt.refuse)
		}
		if err == nil && got != tt.path {
			t.Errorf("RefuseUnsafeHostPath(%q) resolved to %q", tt.path, got)
		}
	}
}
