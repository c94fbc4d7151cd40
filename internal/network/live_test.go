package network

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/container/fake"
	"github.com/git-sandbox/git-sandbox/internal/egress"
	"github.com/git-sandbox/git-sandbox/internal/egress/held"
	"github.com/git-sandbox/git-sandbox/internal/record"
)

// TestLiveChange: a live allow and deny are kept in the record, written
// where the proxy reads them, logged as policy changes, and shown by the
// effective policy with their source; a sandbox without a proxy refuses.
func TestLiveChange(t *testing.T) {
	e, _ := testEnv(t)
	ctx := context.Background()
	if _, err := ChangeLive(&record.Record{Branch: "open"}, false, []string{"a.test"}); err == nil || !strings.Contains(err.Error(), "no egress proxy") {
		t.Fatalf("a sandbox without a proxy: %v", err)
	}
	r := &record.Record{Branch: "b", Egress: &record.Egress{
		Allow: egress.Rules(egress.MustParseEntries(egress.FromUser, "kept.test", "cut.test")),
		Proxy: "git-sandbox-proxy-x",
	}}
	if _, err := ChangeLive(r, false, []string{"http://bad"}); err == nil {
		t.Fatal("a bad entry was taken")
	}
	tgt := LiveTarget{Branch: "b", Update: func(fn func(*record.Record) error) error { return fn(r) }}
	changed, err := e.ChangeEgress(ctx, tgt, false, []string{"new.test", "Port.test:8443"})
	if err != nil || len(changed) != 2 {
		t.Fatalf("allow: %v %v", changed, err)
	}
	changed, err = e.ChangeEgress(ctx, tgt, true, []string{"cut.test"})
	if err != nil || len(changed) != 1 {
		t.Fatalf("deny: %v %v", changed, err)
	}
	live, err := egress.LoadLive(filepath.Join(e.Layout.ProxyDir("b"), egress.LiveFile))
	if err != nil || len(live.Allow) != 2 || live.Allow[1].Entry != "port.test:8443" || len(live.Deny) != 1 {
		t.Fatalf("live file %+v %v", live, err)
	}
	log, _ := os.ReadFile(e.NetLog("b"))
	if n := strings.Count(string(log), `"decision":"policy"`); n != 3 || !strings.Contains(string(log), `"kind":"deny","host":"cut.test"`) {
		t.Fatalf("log:\n%s", log)
	}
	pol, err := EffectivePolicy(r)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pol {
		got = append(got, p.Entry+"|"+string(p.Source)+"|"+p.RemovedBy)
	}
	want := "kept.test|user config|,cut.test|user config|cut.test (live change),new.test|live change|,port.test:8443|live change|,cut.test|live change|"
	if strings.Join(got, ",") != want {
		t.Fatalf("effective policy\n got %s\nwant %s", strings.Join(got, ","), want)
	}
}

// TestLiveChangeCopyModeStopped: on an engine that cannot see this
// machine, a stopped proxy is left alone; its next start loads the file.
func TestLiveChangeCopyModeStopped(t *testing.T) {
	e, _ := testEnv(t)
	f := fake.New()
	r := &record.Record{Branch: "b", Container: "git-sandbox-repo-b", Egress: &record.Egress{Proxy: "git-sandbox-proxy-x"}}
	changed, err := ChangeLive(r, false, []string{"new.test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 1 {
		t.Fatalf("changed %v", changed)
	}
	if err := e.PushLive(context.Background(), f, r, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.Layout.ProxyDir("b"), egress.LiveFile)); err != nil {
		t.Fatal(err)
	}
	if vols, _ := f.ListVolumes(context.Background()); len(vols) != 0 {
		t.Fatalf("volumes made for a stopped proxy: %v", vols)
	}
}

// TestChangeEgress: the change is made under the record's lock and the
// live file written before the lock is let go (two changes at once both
// reach the proxy); a refused change pushes nothing.
func TestChangeEgress(t *testing.T) {
	e, _ := testEnv(t)
	saved := &record.Record{Branch: "b", Egress: &record.Egress{Proxy: "git-sandbox-proxy-x"}}
	liveFile := filepath.Join(e.Layout.ProxyDir("b"), egress.LiveFile)
	var mu sync.Mutex
	update := func(fn func(*record.Record) error) error {
		mu.Lock()
		defer mu.Unlock()
		if err := fn(saved); err != nil {
			return err
		}
		// Still under the lock: the file holds the record's every entry.
		live, err := egress.LoadLive(liveFile)
		if err != nil || len(live.Allow) != len(saved.Egress.Live.Allow) {
			t.Errorf("under the lock, the live file has %+v (%v), the record %+v", live, err, saved.Egress.Live)
		}
		return nil
	}
	var wg sync.WaitGroup
	for _, h := range []string{"a.test", "b.test", "c.test"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.ChangeEgress(context.Background(), LiveTarget{Update: update}, false, []string{h}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if live, err := egress.LoadLive(liveFile); err != nil || len(live.Allow) != 3 {
		t.Fatalf("after three changes at once: %+v %v", live, err)
	}
	saved.Egress.Live = nil
	tgt := LiveTarget{Update: update}
	got, err := e.ChangeEgress(context.Background(), tgt, false, []string{"new.test"})
	if err != nil || strings.Join(got, ",") != "new.test" || saved.Egress.Live == nil || len(saved.Egress.Live.Allow) != 1 {
		t.Fatalf("changed %v %v, record %+v", got, err, saved.Egress)
	}
	if _, err := os.Stat(filepath.Join(e.Layout.ProxyDir("b"), egress.LiveFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ChangeEgress(context.Background(), tgt, true, []string{"x.test GET"}); err == nil {
		t.Fatal("a denial with rules was taken")
	}
}

// TestAllowOnce: a held question is answered by an entry allowed for
// OnceWindow, logged; a host nothing holds is refused, nothing changed.
func TestAllowOnce(t *testing.T) {
	e, _ := testEnv(t)
	r := &record.Record{Branch: "b", Egress: &record.Egress{Proxy: "git-sandbox-proxy-x"}}
	tgt := LiveTarget{Branch: "b", Update: func(fn func(*record.Record) error) error { return fn(r) }}
	if err := os.MkdirAll(e.Layout.NetLogDir("b"), 0o700); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := held.Write(filepath.Join(e.Layout.NetLogDir("b"), held.File), []held.Request{
		{ID: "1", Host: "late.test", Port: 443, Kind: "connect", Entry: "late.test", Since: now, Until: now.Add(time.Minute), Count: 2},
		{ID: "2", Host: "old.test", Port: 443, Kind: "connect", Entry: "old.test", Since: now, Until: now.Add(-time.Second), Count: 1},
	}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"other.test", "old.test"} {
		if _, err := e.AllowOnce(context.Background(), tgt, []string{h}); err == nil || !strings.Contains(err.Error(), "holds no connection") {
			t.Errorf("%s: %v", h, err)
		}
	}
	if r.Egress.Live != nil {
		t.Fatalf("a refused answer changed the record: %+v", r.Egress.Live)
	}
	got, err := e.AllowOnce(context.Background(), tgt, []string{"late.test"})
	if err != nil || strings.Join(got, ",") != "late.test" {
		t.Fatalf("allow once: %v %v", got, err)
	}
	live, err := egress.LoadLive(filepath.Join(e.Layout.ProxyDir("b"), egress.LiveFile))
	if err != nil || len(live.Once) != 1 || len(live.Allow) != 0 || live.Once[0].Until.Sub(now) > OnceWindow+time.Minute || !live.Once[0].Until.After(now) {
		t.Fatalf("live file %+v %v", live, err)
	}
	if log, _ := os.ReadFile(e.NetLog("b")); !strings.Contains(string(log), `"kind":"allow once","host":"late.test"`) {
		t.Fatalf("log:\n%s", log)
	}
}
