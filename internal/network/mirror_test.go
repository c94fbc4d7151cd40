package network

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// A copy-mode proxy's held requests and decision log reach this machine's
// copies, where net pending, dash and net read them, by asking the proxy in
// its container: each record once, from where the last look ended; the
// held copy is emptied when the mirror ends.
func TestMirrorProxyCopiesWhatTheProxyHolds(t *testing.T) {
	e, _ := testEnv(t)
	f := enginefake.New("proxy-image")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spec, err := proxySpec(proxySpecInput{Name: "proxy-1", Image: "proxy-image", Network: "egress", ConfigDir: t.TempDir(), LogDir: t.TempDir(), RepoID: "repo-1", Branch: "t1", UID: 1000, GID: 1000})
	must(t, err)
	id, err := f.Create(ctx, spec)
	must(t, err)
	must(t, f.Start(ctx, id))
	q := held.Request{ID: "q1", Host: "late.test", Port: 80, Kind: "http", Entry: "late.test", Since: time.Now(), Until: time.Now().Add(time.Minute), Count: 2}
	var heldArgv []string
	var froms []string
	f.OnExec = func(c enginefake.Container, o container.ExecOptions) int {
		if o.Argv[1] == "__proxy-log" {
			froms = append(froms, o.Argv[len(o.Argv)-1])
			if o.Argv[len(o.Argv)-1] == "0" {
				fmt.Fprintf(o.Streams.Stdout, "OFFSET 77\n{\"kind\":\"http\",\"host\":\"late.test\",\"decision\":\"denied\"}\n")
			} else {
				fmt.Fprintf(o.Streams.Stdout, "OFFSET 77\n")
			}
			return 0
		}
		heldArgv = o.Argv
		_ = json.NewEncoder(o.Streams.Stdout).Encode(struct {
			Requests []held.Request `json:"requests"`
		}{[]held.Request{q}})
		return 0
	}
	must(t, os.MkdirAll(e.Layout.NetLogDir("t1"), 0o700))
	mirrorEvery = 20 * time.Millisecond
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.MirrorProxy(ctx, f, &record.Record{Branch: "t1", Egress: &record.Egress{Proxy: "proxy-1"}}, true)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		qs, _ := e.Held("t1")
		if len(qs) == 1 && qs[0].Host == "late.test" && qs[0].Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy holds %+v", qs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Equal(heldArgv, []string{proxyBinary, "__proxy-held", ProxyLogDir + "/" + held.File}) {
		t.Errorf("asked the proxy with %q", heldArgv)
	}
	cancel()
	<-done
	if qs, _ := e.Held("t1"); len(qs) != 0 {
		t.Errorf("the copy after the mirror ended: %+v", qs)
	}
	b, _ := os.ReadFile(e.NetLog("t1"))
	if strings.Count(string(b), `"host":"late.test"`) != 1 {
		t.Errorf("the log here after the mirror:\n%s", b)
	}
	if len(froms) < 2 || froms[0] != "0" || froms[len(froms)-1] != "77" {
		t.Errorf("the looks started at %q, want 0 then where the last ended", froms)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
