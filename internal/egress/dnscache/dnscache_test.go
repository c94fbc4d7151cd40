package dnscache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers every name with one address of its own (or err),
// counting lookups per name; with gate set, each lookup waits for it.
type fakeResolver struct {
	mu    sync.Mutex
	asked map[string]int
	err   error
	empty bool
	gate  chan struct{}
	// started receives a name as each lookup starts, when set.
	started  chan string
	deadline atomic.Bool // the last lookup's context had a deadline
}

func newFake() *fakeResolver { return &fakeResolver{asked: map[string]int{}} }

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.asked[network+" "+host]++
	n := r.asked[network+" "+host]
	err, empty, gate, started := r.err, r.empty, r.gate, r.started
	r.mu.Unlock()
	_, ok := ctx.Deadline()
	r.deadline.Store(ok)
	if started != nil {
		started <- host
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	if empty {
		return nil, nil
	}
	return []netip.Addr{netip.AddrFrom4([4]byte{192, 0, 2, byte(n)})}, nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked["ip "+host]
}

// clock is a time the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestCache(r Resolver, max int) (*Cache, *clock) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	return newCache(r, 10*time.Second, max, clk.now), clk
}

func lookup(t *testing.T, c *Cache, host string) netip.Addr {
	t.Helper()
	a, err := c.LookupNetIP(context.Background(), "ip", host)
	if err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	if len(a) != 1 {
		t.Fatalf("%s: %v", host, a)
	}
	return a[0]
}

// An answer is kept for its lifetime, then asked again; each caller gets a
// slice of its own.
func TestKeptForItsLifetime(t *testing.T) {
	r := newFake()
	c, clk := newTestCache(r, 8)
	first := lookup(t, c, "a.test.")
	a, _ := c.LookupNetIP(context.Background(), "ip", "a.test.")
	a[0] = netip.MustParseAddr("203.0.113.9") // the caller's own copy
	clk.add(10*time.Second - time.Nanosecond)
	if got := lookup(t, c, "a.test."); got != first || r.count("a.test.") != 1 {
		t.Fatalf("within its lifetime: %v (first %v), asked %d times", got, first, r.count("a.test."))
	}
	clk.add(time.Nanosecond)
	if got := lookup(t, c, "a.test."); got == first || r.count("a.test.") != 2 {
		t.Fatalf("after its lifetime: %v (first %v), asked %d times", got, first, r.count("a.test."))
	}
	// The network asked for is part of the name's key.
	if _, err := c.LookupNetIP(context.Background(), "ip4", "a.test."); err != nil || r.asked["ip4 a.test."] != 1 {
		t.Fatalf("ip4: %v, asked %d", err, r.asked["ip4 a.test."])
	}
}

// A failure is never kept: not "no such host", not a timeout, not an
// empty answer.
func TestFailuresAreNotKept(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		empty bool
	}{
		{"no such host", &net.DNSError{Err: "no such host", Name: "a.test.", IsNotFound: true}, false},
		{"timeout", &net.DNSError{Err: "i/o timeout", Name: "a.test.", IsTimeout: true}, false},
		{"empty answer", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFake()
			r.err, r.empty = tc.err, tc.empty
			c, _ := newTestCache(r, 8)
			for range 3 {
				a, err := c.LookupNetIP(context.Background(), "ip", "a.test.")
				if tc.err != nil && !errors.Is(err, tc.err) || len(a) != 0 {
					t.Fatalf("got %v, %v", a, err)
				}
			}
			if r.count("a.test.") != 3 || c.len() != 0 {
				t.Fatalf("asked %d times, %d kept", r.count("a.test."), c.len())
			}
			r.mu.Lock()
			r.err, r.empty = nil, false
			r.mu.Unlock()
			lookup(t, c, "a.test.")
			lookup(t, c, "a.test.")
			if r.count("a.test.") != 4 {
				t.Fatalf("once it answers: asked %d times", r.count("a.test."))
			}
		})
	}
}

// Lookups of one name made while one is under way share it: the resolver
// is asked once and every caller gets its answer.
func TestConcurrentLookupsShareOne(t *testing.T) {
	r := newFake()
	r.gate, r.started = make(chan struct{}), make(chan string, 1)
	c, _ := newTestCache(r, 8)
	const n = 50
	var wg sync.WaitGroup
	got := make([]netip.Addr, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := c.LookupNetIP(context.Background(), "ip", "a.test.")
			errs[i] = err
			if err == nil {
				got[i] = a[0]
			}
		}()
	}
	<-r.started
	// Every caller is waiting on the one lookup before it answers.
	for c.waiting("ip", "a.test.") < n {
		time.Sleep(time.Millisecond)
	}
	close(r.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("caller %d: %v, %v (caller 0: %v)", i, got[i], errs[i], got[0])
		}
	}
	if r.count("a.test.") != 1 {
		t.Fatalf("asked %d times", r.count("a.test."))
	}
	// A failure is shared the same way, and then not kept.
	r.mu.Lock()
	r.err, r.gate = errors.New("server failure"), make(chan struct{})
	r.mu.Unlock()
	c2, _ := newTestCache(r, 8)
	var failed atomic.Int32
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c2.LookupNetIP(context.Background(), "ip", "b.test."); err != nil {
				failed.Add(1)
			}
		}()
	}
	<-r.started
	for c2.waiting("ip", "b.test.") < n {
		time.Sleep(time.Millisecond)
	}
	close(r.gate)
	wg.Wait()
	if failed.Load() != n || r.count("b.test.") != 1 || c2.len() != 0 {
		t.Fatalf("%d of %d failed, asked %d times, %d kept", failed.Load(), n, r.count("b.test."), c2.len())
	}
}

// A caller that stops waiting gets its context's error at once; the lookup
// it started goes on with its deadline for the others, and is kept.
func TestCallerGivingUpLeavesTheLookup(t *testing.T) {
	r := newFake()
	r.gate, r.started = make(chan struct{}), make(chan string, 1)
	c, _ := newTestCache(r, 8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	first := make(chan error, 1)
	go func() {
		_, err := c.LookupNetIP(ctx, "ip", "a.test.")
		first <- err
	}()
	<-r.started
	if !r.deadline.Load() {
		t.Error("the lookup lost its caller's deadline")
	}
	second := make(chan netip.Addr, 1)
	go func() { second <- lookup(t, c, "a.test.") }()
	for c.waiting("ip", "a.test.") < 2 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up: %v", err)
	}
	close(r.gate)
	a := <-second
	if got := lookup(t, c, "a.test."); got != a || r.count("a.test.") != 1 {
		t.Fatalf("after: %v (shared %v), asked %d times", got, a, r.count("a.test."))
	}
	// A caller without a deadline still gives the lookup one.
	r.deadline.Store(false)
	lookup(t, c, "b.test.")
	if !r.deadline.Load() {
		t.Error("a lookup without a deadline")
	}
}

// At most max names are kept: expired ones go first, then the oldest.
func TestBounded(t *testing.T) {
	r := newFake()
	c, clk := newTestCache(r, 3)
	for i := range 5 {
		lookup(t, c, fmt.Sprintf("n%d.test.", i))
		if c.len() > 3 {
			t.Fatalf("%d kept", c.len())
		}
	}
	// n2..n4 were kept, n0 and n1 dropped.
	for _, i := range []int{4, 3, 2, 1, 0} {
		want := 1
		if i < 2 {
			want = 2
		}
		lookup(t, c, fmt.Sprintf("n%d.test.", i))
		if got := r.count(fmt.Sprintf("n%d.test.", i)); got != want {
			t.Errorf("n%d asked %d times, want %d", i, got, want)
		}
	}
	// Expired names are dropped when a name is stored, full or not.
	clk.add(time.Minute)
	lookup(t, c, "late.test.")
	if c.len() != 1 {
		t.Fatalf("after the others expired: %d kept", c.len())
	}
	// Many distinct names (a wildcard's): never more than the bound.
	for i := range 10_000 {
		lookup(t, c, fmt.Sprintf("w%d.wild.test.", i))
	}
	if c.len() != 3 {
		t.Fatalf("%d kept", c.len())
	}
}

// waiting is how many callers a lookup of host under way has (tests).
func (c *Cache) waiting(network, host string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl := c.calls[key{network, host}]; cl != nil {
		return cl.waiters
	}
	return 0
}

// Or keeps a resolver it is given and puts a cache in front of the
// system's otherwise.
func TestOr(t *testing.T) {
	r := newFake()
	if got := Or(r); got != Resolver(r) {
		t.Errorf("Or(r) = %T", got)
	}
	c, ok := Or(nil).(*Cache)
	if !ok {
		t.Fatalf("Or(nil) = %T", Or(nil))
	}
	if res, ok := c.r.(*net.Resolver); !ok || !res.PreferGo {
		t.Errorf("behind the cache: %#v", c.r)
	}
	// A name the system resolves without a name server.
	if a, err := c.LookupNetIP(context.Background(), "ip", "localhost"); err != nil || len(a) == 0 {
		t.Errorf("localhost: %v, %v", a, err)
	}
}
