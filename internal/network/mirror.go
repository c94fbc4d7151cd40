package network

// A copy-mode proxy's files are volumes on its engine: its decision log
// and the connections it holds are out of sight of net, net pending and
// dash, which read this machine's files. While the agent runs, its
// supervisor keeps copies here (MirrorProxy), asking the proxy through
// its own container: git-sandbox __proxy-log and __proxy-held, run by the
// binary the proxy's image holds.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// mirrorEvery is how often MirrorProxy asks a copy-mode proxy.
var mirrorEvery = time.Second

// mirrorOffset is the file beside the sandbox's log here saying how far
// into the proxy's log the copy has come.
const mirrorOffset = "mirror.offset"

// MirrorProxy keeps this machine's copies of a copy-mode sandbox's proxy
// files until ctx ends: the decision log's new records appended to the
// sandbox's log here every mirrorEvery (and once more at the end), and,
// with prompting (held), the questions it holds written where Held reads
// (emptied at the end: they go with its connections). A look that fails
// (the proxy restarting) is tried again at the next.
func (e *Env) MirrorProxy(ctx context.Context, d Engine, r *record.Record, prompt bool) {
	if r.Egress == nil {
		return
	}
	local := filepath.Join(e.Layout.NetLogDir(r.Branch), held.File)
	for {
		_ = e.mirrorLog(ctx, d, r)
		if prompt {
			if qs, err := askHeld(ctx, d, r.Egress.Proxy); err == nil {
				_ = held.Write(local, qs)
			}
		}
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = e.mirrorLog(last, d, r)
			if prompt {
				_ = held.Write(local, nil)
			}
			return
		case <-time.After(mirrorEvery):
		}
	}
}

// mirrorLog appends the proxy's records since the last look to the
// sandbox's log here.
func (e *Env) mirrorLog(ctx context.Context, d Engine, r *record.Record) error {
	dir := e.Layout.NetLogDir(r.Branch)
	from, _ := strconv.ParseInt(strings.TrimSpace(readSmall(filepath.Join(dir, mirrorOffset))), 10, 64)
	out, errs := limitedBuffer{max: 5 << 20}, limitedBuffer{}
	code, err := d.Exec(ctx, r.Egress.Proxy, container.ExecOptions{
		Argv:    []string{proxyBinary, "__proxy-log", ProxyLogDir + "/" + ProxyLogFile, "--from", strconv.FormatInt(from, 10)},
		Streams: container.Streams{Stdout: &out, Stderr: &errs},
	})
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("the proxy's log: exit code %d: %s", code, errs.String())
	}
	head, records, _ := bytes.Cut(out.Bytes(), []byte("\n"))
	next, err := strconv.ParseInt(strings.TrimPrefix(string(head), "OFFSET "), 10, 64)
	if err != nil {
		return fmt.Errorf("the proxy's log: %q", head)
	}
	if err := appendRecords(e.NetLog(r.Branch), records); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, mirrorOffset), []byte(strconv.FormatInt(next, 10)+"\n"), 0o600)
}

// appendRecords writes the proxy's records to the log at path, each
// through the log's own writer (which rotates it here too).
func appendRecords(path string, records []byte) error {
	if len(records) == 0 {
		return nil
	}
	l, err := egress.OpenLog(path, nil)
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(records))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec egress.Record
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			l.Write(rec)
		}
	}
	return l.Close()
}

// readSmall reads a small file ("" when it cannot).
func readSmall(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// askHeld asks the proxy container for the questions it holds.
func askHeld(ctx context.Context, d Engine, proxy string) ([]held.Request, error) {
	out, errs := limitedBuffer{max: 1 << 20}, limitedBuffer{}
	code, err := d.Exec(ctx, proxy, container.ExecOptions{
		Argv:    []string{proxyBinary, "__proxy-held", ProxyLogDir + "/" + held.File},
		Streams: container.Streams{Stdout: &out, Stderr: &errs},
	})
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("the proxy's held requests: exit code %d: %s", code, errs.String())
	}
	return held.Parse(out.Bytes(), time.Now())
}
