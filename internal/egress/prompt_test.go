package egress

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/git-sandbox/git-sandbox/internal/egress/held"
)

// promptEnv is a proxy with prompting on, a plain HTTP upstream on
// loopback and the names late.test, other.test and gone.test for it.
type promptEnv struct {
	port, live, held string
	client           *http.Client
	log              *bytes.Buffer
	mu               *sync.Mutex
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func newPromptEnv(t *testing.T, timeout time.Duration) *promptEnv {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	dir := t.TempDir()
	e := &promptEnv{port: port, live: filepath.Join(dir, LiveFile), held: filepath.Join(dir, held.File), log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	p, err := New(Options{
		Policy:   &Policy{Allow: MustParseEntries(FromUser, "127.0.0.1:"+port)},
		Live:     e.live,
		Resolver: newResolver("late.test", "127.0.0.1", "other.test", "127.0.0.1", "gone.test", "127.0.0.1"),
		Log:      NewLog(lockedBuffer{e.mu, e.log}, nil),
		Prompt:   &held.Options{File: e.held, Timeout: timeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	pu := &url.URL{Scheme: "http", Host: serve(t, p)}
	e.client = &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}}
	return e
}

func (e *promptEnv) logText() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log.String()
}

// get asks for http://host:port/ and returns the status and body.
func (e *promptEnv) get(t *testing.T, host string) (int, string) {
	resp, err := e.client.Get("http://" + host + ":" + e.port + "/")
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waiting waits until the held file shows a question for host and
// returns it.
func (e *promptEnv) waiting(t *testing.T, host string, count int) held.Request {
	t.Helper()
	for i := 0; i < 500; i++ {
		reqs, err := held.Read(e.held, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if r.Host == host && r.Count == count {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no question for %d connection(s) to %s in %s", count, host, readFile(t, e.held))
	return held.Request{}
}

// Two connections to a host off the list wait on one question; an entry
// allowed once lets both through; the file is empty again after.
func TestPromptAllowOnceReleasesEveryHeldConnection(t *testing.T) {
	e := newPromptEnv(t, time.Minute)
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = e.get(t, "late.test")
		}()
	}
	q := e.waiting(t, "late.test", 2)
	if q.Entry != "late.test:"+e.port || q.Kind != "http" || !q.Until.After(q.Since) {
		t.Errorf("question: %+v", q)
	}
	var l LivePolicy
	l.AllowOnce(q.Entry, time.Now().Add(time.Minute), time.Now())
	if err := WriteLive(e.live, &l); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if statuses[0] != 200 || statuses[1] != 200 {
		t.Fatalf("after allow once: %v", statuses)
	}
	if reqs, err := held.Read(e.held, time.Now()); err != nil || len(reqs) != 0 {
		t.Errorf("still held: %v %v", reqs, err)
	}
	// The log is written once the response is copied: wait for both.
	for i := 0; i < 500 && strings.Count(e.logText(), "\n") < 2; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var rec Record
	if err := json.Unmarshal(bytes.SplitN(e.log.Bytes(), []byte("\n"), 2)[0], &rec); err != nil || rec.Decision != Allowed || rec.Held <= 0 {
		t.Errorf("log of a held connection let through: %+v %v\n%s", rec, err, e.log)
	}
}

// A question nobody answers is refused as without prompting, saying it
// was held; a live denial refuses at once; a removal or an IP literal is
// never held.
func TestPromptTimesOutOrDenies(t *testing.T) {
	e := newPromptEnv(t, 300*time.Millisecond)
	status, body := e.get(t, "other.test")
	if status != 403 || !strings.Contains(body, "held 300ms for an answer") {
		t.Fatalf("unanswered: %d %q", status, body)
	}
	e2 := newPromptEnv(t, time.Minute)
	done := make(chan string)
	go func() {
		_, body := e2.get(t, "gone.test")
		done <- body
	}()
	e2.waiting(t, "gone.test", 1)
	var l LivePolicy
	l.Change(true, MustParseEntries(FromLive, "gone.test"))
	if err := WriteLive(e2.live, &l); err != nil {
		t.Fatal(err)
	}
	if body := <-done; !strings.Contains(body, "removed by live change") {
		t.Errorf("denied while held: %q", body)
	}
	// Denied now: the next try is refused without a question.
	if status, body := e2.get(t, "gone.test"); status != 403 || strings.Contains(body, "held") {
		t.Errorf("after the denial: %d %q", status, body)
	}
}

// An entry allowed once ends at its time.
func TestAllowedOnceEnds(t *testing.T) {
	now := time.Now()
	var l LivePolicy
	l.AllowOnce("a.test", now.Add(time.Second), now)
	l.AllowOnce("b.test", now.Add(-time.Second), now)
	base := &Policy{}
	for _, c := range []struct {
		at   time.Time
		host string
		want bool
	}{{now, "a.test", true}, {now, "b.test", false}, {now.Add(2 * time.Second), "a.test", false}} {
		p, err := base.withAt(&l, c.at)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Check(Target{Host: c.host, Port: 443}, Connect); (err == nil) != c.want {
			t.Errorf("%s at %v: %v", c.host, c.at.Sub(now), err)
		}
	}
	l.PruneOnce(now.Add(2 * time.Second))
	if len(l.Once) != 0 {
		t.Errorf("pruned: %+v", l.Once)
	}
}
