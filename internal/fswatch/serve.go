package fswatch

// The watcher runs in the sandbox's supervisor; snapshots ask it over a
// unix socket in the sandbox's state directory. One question per
// connection:
//
//	"since <token>\n"  →  "changed <token>\n" or "all <token>\n", then
//	                      each path followed by a NUL
//	"stats\n"          →  the Stats, as JSON
//
// Anything that goes wrong on the asking side — no socket, no answer in
// time, a garbled answer — is answered All by the client: a snapshot
// then looks at everything.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Serve answers questions on a unix socket at path until ctx ends. The
// socket is made private to the user (the state directory is too).
func (w *Watcher) Serve(ctx context.Context, path string) error {
	_ = os.Remove(path)
	addr, done, err := sockAddr(path)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	l, err := net.Listen("unix", addr)
	done()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		_ = l.Close()
		return fmt.Errorf("watch: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				_ = os.Remove(path)
				return nil
			}
			return fmt.Errorf("watch: %w", err)
		}
		go w.answer(c)
	}
}

func (w *Watcher) answer(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(io.LimitReader(c, 4096)).ReadString('\n')
	if err != nil {
		return
	}
	line = strings.TrimSuffix(line, "\n")
	bw := bufio.NewWriter(c)
	defer bw.Flush()
	if line == "stats" {
		_ = json.NewEncoder(bw).Encode(w.Stats())
		return
	}
	token, ok := strings.CutPrefix(line, "since ")
	if !ok {
		return
	}
	a := w.Since(token)
	kind := "changed"
	if a.All {
		kind = "all"
	}
	fmt.Fprintf(bw, "%s %s\n", kind, a.Token)
	for _, p := range a.Paths {
		bw.WriteString(p)
		bw.WriteByte(0)
	}
}

// Client asks the watcher behind a socket.
type Client struct {
	// Socket is the watcher's socket.
	Socket string
	// Timeout bounds a question; 0 is five seconds.
	Timeout time.Duration
}

func (c Client) ask(ctx context.Context, q string) ([]byte, error) {
	t := c.Timeout
	if t <= 0 {
		t = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	addr, done, err := sockAddr(c.Socket)
	if err != nil {
		return nil, err
	}
	defer done()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := io.WriteString(conn, q+"\n"); err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(conn, 1<<30))
}

// Since asks what changed after token. Any failure to ask is answered
// All (with no token), with the error.
func (c Client) Since(ctx context.Context, token string) (Answer, error) {
	b, err := c.ask(ctx, "since "+token)
	if err != nil {
		return Answer{All: true}, err
	}
	head, rest, ok := bytes.Cut(b, []byte("\n"))
	kind, tok, ok2 := strings.Cut(string(head), " ")
	if !ok || !ok2 || (kind != "changed" && kind != "all") {
		return Answer{All: true}, errors.New("watch: a garbled answer")
	}
	a := Answer{Token: tok, All: kind == "all"}
	if a.All {
		return a, nil
	}
	if len(rest) > 0 && rest[len(rest)-1] != 0 {
		return Answer{All: true}, errors.New("watch: a cut answer")
	}
	for _, p := range bytes.Split(rest, []byte{0}) {
		if len(p) > 0 {
			a.Paths = append(a.Paths, string(p))
		}
	}
	return a, nil
}

// Stats asks the watcher how it is.
func (c Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	b, err := c.ask(ctx, "stats")
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// sockAddr is the address of the socket at path: the path itself, or,
// when it is longer than a socket address may be, the same file named
// through a descriptor of its directory (/proc/self/fd/N/name), which
// done closes.
func sockAddr(path string) (addr string, done func(), err error) {
	if len(path) < 100 {
		return path, func() {}, nil
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), filepath.Base(path)), func() { d.Close() }, nil
}
