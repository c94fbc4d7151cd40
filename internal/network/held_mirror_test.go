package network

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container"
	enginefake "github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// A copy-mode proxy's held requests reach this machine's copy, where net
// pending and dash read them, by asking the proxy in its container; the
// copy is emptied when the mirror ends.
func TestMirrorHeldCopiesWhatTheProxyHolds(t *testing.T) {
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
	var argv []string
	f.OnExec = func(c enginefake.Container, o container.ExecOptions) int {
		argv = o.Argv
		_ = json.NewEncoder(o.Streams.Stdout).Encode(struct {
			Requests []held.Request `json:"requests"`
		}{[]held.Request{q}})
		return 0
	}
	must(t, os.MkdirAll(e.Layout.NetLogDir("t1"), 0o700))
	heldMirrorEvery = 20 * time.Millisecond
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.MirrorHeld(ctx, f, &record.Record{Branch: "t1", Egress: &record.Egress{Proxy: "proxy-1"}})
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
	if !slices.Equal(argv, []string{proxyBinary, "__proxy-held", ProxyLogDir + "/" + held.File}) {
		t.Errorf("asked the proxy with %q", argv)
	}
	cancel()
	<-done
	if qs, _ := e.Held("t1"); len(qs) != 0 {
		t.Errorf("the copy after the mirror ended: %+v", qs)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
