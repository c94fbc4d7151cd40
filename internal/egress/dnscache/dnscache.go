// Package dnscache keeps a resolver's answers for a short fixed while: the
// egress proxy resolves the name of every connection it makes, and a name
// an agent connects to once it usually connects to again and again (a
// clone, a package install), so asking the name server each time costs a
// round trip per connection.
//
// It keeps answers only: a failure (no such host, a timeout) is never
// kept, so the next lookup asks again. It decides nothing: whoever uses an
// answer checks it against the policy of the moment, each time. Lookups of
// one name made while one is under way wait for that one and share its
// answer. It holds a bounded number of names (an allow list with a
// wildcard allows any number of them): past that the oldest are dropped.
package dnscache

import (
	"container/list"
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Resolver looks up a host name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Lifetime is how long an answer is kept. Go's resolver does not give a
// record's TTL, so one lifetime serves every name. It is well under the
// TTLs that services which move their addresses publish (a minute or
// more for cloud load balancers, 20 s to 5 min for CDNs), so an address
// is never used much longer than its owner allows, and it is long enough
// that a burst of connections to one host (a clone, an install) asks once.
const Lifetime = 10 * time.Second

// MaxNames is how many names are kept at most.
const MaxNames = 1024

// Cache is a Resolver that keeps the answers of another for Lifetime. It is
// safe for concurrent use.
type Cache struct {
	r   Resolver
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[key]*list.Element // of *entry
	order   list.List             // of *entry, oldest (soonest to expire) first
	calls   map[key]*call         // lookups under way
}

type key struct{ network, host string }

type entry struct {
	key     key
	addrs   []netip.Addr
	expires time.Time
}

// call is a lookup under way; done is closed when addrs and err are set.
type call struct {
	done    chan struct{}
	addrs   []netip.Addr
	err     error
	waiters int // callers that joined it (c.mu)
}

// Or is r, or when r is nil the system's resolver (Go's own) behind a
// Cache.
func Or(r Resolver) Resolver {
	if r != nil {
		return r
	}
	return New(&net.Resolver{PreferGo: true})
}

// New is a cache in front of r.
func New(r Resolver) *Cache { return newCache(r, Lifetime, MaxNames, time.Now) }

func newCache(r Resolver, ttl time.Duration, max int, now func() time.Time) *Cache {
	return &Cache{r: r, ttl: ttl, max: max, now: now, entries: map[key]*list.Element{}, calls: map[key]*call{}}
}

// LookupNetIP answers from the cache while an answer is fresh, and asks
// the resolver otherwise. A lookup already under way for the name is
// joined rather than repeated; it runs to its end even if the caller that
// started it stops waiting (its deadline still applies), so that its
// answer serves the others. The caller gets a slice of its own.
func (c *Cache) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	k := key{network, host}
	c.mu.Lock()
	if el, ok := c.entries[k]; ok {
		e := el.Value.(*entry)
		if c.now().Before(e.expires) {
			c.mu.Unlock()
			return slices.Clone(e.addrs), nil
		}
		c.remove(el)
	}
	cl, ok := c.calls[k]
	if !ok {
		cl = &call{done: make(chan struct{})}
		c.calls[k] = cl
		go c.lookup(ctx, k, cl)
	}
	cl.waiters++
	c.mu.Unlock()
	select {
	case <-cl.done:
		if cl.err != nil {
			return nil, cl.err
		}
		return slices.Clone(cl.addrs), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// lookupLimit bounds a lookup whose caller set no deadline: a lookup that
// never ended would hold every later caller of its name.
const lookupLimit = 30 * time.Second

// lookup asks the resolver for k on behalf of every caller waiting on cl,
// with ctx's deadline (or lookupLimit) but not its cancellation, and keeps
// a good answer.
func (c *Cache) lookup(ctx context.Context, k key, cl *call) {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(lookupLimit)
	}
	lctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), d)
	defer cancel()
	addrs, err := c.r.LookupNetIP(lctx, k.network, k.host)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.calls, k)
	cl.addrs, cl.err = addrs, err
	close(cl.done)
	if err != nil || len(addrs) == 0 {
		return
	}
	c.store(k, slices.Clone(addrs))
}

// store keeps addrs for k; c.mu is held. Every answer lives equally long,
// so the list is in order of expiry: expired entries and, when full, the
// oldest are dropped from its front.
func (c *Cache) store(k key, addrs []netip.Addr) {
	now := c.now()
	if el, ok := c.entries[k]; ok {
		c.remove(el)
	}
	for el := c.order.Front(); el != nil; el = c.order.Front() {
		if len(c.entries) < c.max && now.Before(el.Value.(*entry).expires) {
			break
		}
		c.remove(el)
	}
	if c.max <= 0 {
		return
	}
	c.entries[k] = c.order.PushBack(&entry{key: k, addrs: addrs, expires: now.Add(c.ttl)})
}

func (c *Cache) remove(el *list.Element) {
	delete(c.entries, el.Value.(*entry).key)
	c.order.Remove(el)
}

// len is the number of names kept (expired ones included until they are
// dropped).
func (c *Cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
