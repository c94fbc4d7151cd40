package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLookPath(t *testing.T) {
	p, err := LookPath("sh")
	if err != nil || !filepath.IsAbs(p) {
		t.Errorf("LookPath(sh) = %q, %v; want an absolute path", p, err)
	}
	if p, err := LookPath("git-sandbox-no-such-program"); err == nil {
		t.Errorf("LookPath of a missing program = %q, no error", p)
	}
}

func TestRunFilter(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_DIR", "/inherited")
	tests := []struct {
		name    string
		o       FilterOptions
		want    string
		wantErr string
	}{
		{
			name: "stdin to stdout",
			o:    FilterOptions{Command: "tr a-z A-Z", Stdin: strings.NewReader("clean me\n")},
			want: "CLEAN ME\n",
		},
		{
			name: "working directory and added environment",
			o:    FilterOptions{Command: `printf '%s|%s' "$(pwd)" "$EXTRA"`, Dir: dir, Env: []string{"EXTRA=x"}},
			want: dir + "|x",
		},
		{
			name: "inherited GIT_ variables are dropped, the caller's kept",
			o:    FilterOptions{Command: `printf '%s|%s' "${GIT_DIR-unset}" "$GIT_WORK_TREE"`, Env: []string{"GIT_WORK_TREE=/w"}},
			want: "unset|/w",
		},
		{
			name:    "stderr is kept in the error",
			o:       FilterOptions{Command: "echo 'lfs: no such object' >&2; exit 2"},
			wantErr: "lfs: no such object",
		},
		{
			name:    "a silent failure names the command",
			o:       FilterOptions{Command: "exit 3"},
			wantErr: "exit 3: exit status 3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := RunFilter(context.Background(), tt.o)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(out) != tt.want {
				t.Errorf("RunFilter = %q, %v; want %q", out, err, tt.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := Run(context.Background(), RunOptions{
		Argv: []string{"sh", "-c", `printf '%s|%s|%s' "$1" "$(pwd)" "$ONLY"`, "sh", "arg one"},
		Env:  []string{"ONLY=this", "PATH=" + os.Getenv("PATH")},
		Dir:  dir, Output: &out,
	})
	if err != nil || out.String() != "arg one|"+dir+"|this" {
		t.Errorf("Run = %v, output %q", err, out.String())
	}
	if err := Run(context.Background(), RunOptions{}); err == nil {
		t.Error("Run without a program gave no error")
	}
	if err := Run(context.Background(), RunOptions{Argv: []string{"sh", "-c", "exit 4"}}); err == nil || !strings.Contains(err.Error(), "exit status 4") {
		t.Errorf("Run of a failing program = %v, want its exit status", err)
	}
}

// TestRunKillsTheGroupAtTheTimeout: a program that started a child of its
// own, which holds the output open, is ended with that child when the
// timeout passes (the output's pipe closes, so Run returns at once rather
// than after the child's 60 s).
func TestRunKillsTheGroupAtTheTimeout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), RunOptions{
			Argv:    []string{"sh", "-c", "sleep 60 & echo started; wait"},
			Output:  w,
			Timeout: 200 * time.Millisecond,
		})
		w.Close()
	}()
	line, _ := bufio.NewReader(r).ReadString('\n')
	if line != "started\n" {
		t.Fatalf("program printed %q", line)
	}
	err = <-done
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "sh: ") {
		t.Errorf("Run past its timeout = %v, want sh: context deadline exceeded", err)
	}
	// The child (sleep 60) must be gone with its group: the pipe reaches
	// EOF once no process holds its write end.
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Errorf("after the kill: %q, %v", rest, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Run took %s: the group was not killed", d)
	}
}

func TestRunEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Run(ctx, RunOptions{Argv: []string{"sleep", "60"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run with an ended context = %v, want context.Canceled", err)
	}
}

// TestSpawnDetached: the program runs in a session of its own (its
// session id is its pid), in the directory and environment given, with
// its output where it was asked to go.
func TestSpawnDetached(t *testing.T) {
	sh, err := LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	script := `set -- $(cat /proc/$$/stat); echo "$$ $6 $(pwd) $MARK"`
	err = SpawnDetached(SpawnOptions{Path: sh, Args: []string{"sh", "-c", script}, Dir: dir, Env: []string{"MARK=m1"}, Output: w})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		t.Fatalf("spawned program printed %q", out)
	}
	if f[0] != f[1] {
		t.Errorf("pid %s, session %s: not a session of its own", f[0], f[1])
	}
	if pid, _ := strconv.Atoi(f[0]); pid == os.Getpid() {
		t.Errorf("ran in this process")
	}
	if f[2] != dir || f[3] != "m1" {
		t.Errorf("dir %q env %q, want %q and m1", f[2], f[3], dir)
	}
	if err := SpawnDetached(SpawnOptions{Path: filepath.Join(dir, "missing"), Args: []string{"missing"}}); err == nil {
		t.Error("spawning a missing program gave no error")
	}
}

func TestSelf(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := Self("/some/dir", "-C", "/some/dir", "ps")
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != exe || cmd.Dir != "/some/dir" || strings.Join(cmd.Args[1:], " ") != "-C /some/dir ps" {
		t.Errorf("Self = %s %q in %s; want %s", cmd.Path, cmd.Args, cmd.Dir, exe)
	}
}

func TestStartPager(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"git's defaults when unset", nil, "FRX|-c|page one\n"},
		{"the user's own settings kept", map[string]string{"LESS": "R", "LV": "-x"}, "R|-x|page one\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range []string{"LESS", "LV"} {
				if v, ok := tt.env[k]; ok {
					t.Setenv(k, v)
				} else {
					t.Setenv(k, "")
					os.Unsetenv(k)
				}
			}
			f, err := os.Create(filepath.Join(t.TempDir(), "screen"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p, err := StartPager(`printf '%s|%s|' "$LESS" "$LV"; cat`, f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Write([]byte("page one\n")); err != nil {
				t.Fatal(err)
			}
			if err := p.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			b, _ := os.ReadFile(f.Name())
			if string(b) != tt.want {
				t.Errorf("pager showed %q, want %q", b, tt.want)
			}
		})
	}
}

func TestPagerCloseReportsItsExit(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "screen"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := StartPager("cat >/dev/null; exit 5", f)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err == nil || !strings.Contains(err.Error(), "exit status 5") {
		t.Errorf("Close = %v, want exit status 5", err)
	}
}

// TestDialSSH runs a stand-in for ssh ($GIT_SANDBOX_SSH) that prints the
// arguments it got and then echoes its input: the connection is that
// process's stdin and stdout.
func TestDialSSH(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "ssh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$*\"\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(SSHEnv, fake)
	tests := []struct {
		user, port string
		want       string
	}{
		{"", "", "-o ConnectTimeout=10 -T -- host.example docker system dial-stdio"},
		{"me", "2222", "-o ConnectTimeout=10 -T -l me -p 2222 -- host.example docker system dial-stdio"},
	}
	for _, tt := range tests {
		c, err := DialSSH(context.Background(), tt.user, "host.example", tt.port)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		args, err := br.ReadString('\n')
		if err != nil || strings.TrimSpace(args) != tt.want {
			t.Errorf("ssh ran with %q (%v), want %q", args, err, tt.want)
		}
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		if echo, err := br.ReadString('\n'); err != nil || echo != "ping\n" {
			t.Errorf("echo = %q, %v", echo, err)
		}
		if c.LocalAddr().Network() != "ssh" || c.RemoteAddr().String() != "ssh" {
			t.Errorf("addresses %v %v", c.LocalAddr(), c.RemoteAddr())
		}
		if c.SetDeadline(time.Now()) != nil || c.SetReadDeadline(time.Now()) != nil || c.SetWriteDeadline(time.Now()) != nil {
			t.Error("deadlines are accepted and ignored")
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
	}
	t.Setenv(SSHEnv, filepath.Join(t.TempDir(), "missing-ssh"))
	if _, err := DialSSH(context.Background(), "", "h", ""); err == nil {
		t.Error("a missing ssh program gave no error")
	}
}
