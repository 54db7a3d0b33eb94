package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// Driver-level tests of read-write locks and semaphores (kinds Shared,
// Write and Permit) that reach into Redis's queue, against real Redis: a
// single server, a Cluster and a Sentinel-managed master run the same
// tests. Those that need no more than the driver interface (readers share,
// a writer excludes and waits, tokens, permits) are the conformance suite's
// DriverKinds section, which the three harnesses run too.

type kindEnv struct {
	t      *testing.T
	newRDB func() redis.UniversalClient
}

func (e kindEnv) driver() *redisDriver {
	e.t.Helper()
	rdb := e.newRDB()
	d, err := newDriver(e.t.Context(), rdb, Options{}, true)
	if err != nil {
		_ = rdb.Close()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = d.Close() })
	return d
}

var kindSeq atomic.Int64

func kindName(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), kindSeq.Add(1))
}

func req(name, owner string, kind driver.Kind, wait bool) driver.Request {
	r := driver.Request{Name: name, Owner: owner, Kind: kind, TTL: 2 * time.Second, Wait: wait, Label: "label-" + owner}
	if kind == driver.Permit {
		r.Limit = 3
	}
	return r
}

func held(r driver.Request, g driver.Grant) driver.Held {
	return driver.Held{Name: r.Name, Owner: r.Owner, TTL: r.TTL, Kind: r.Kind, Token: g.Token, Handle: g.Handle}
}

func mustAcquire(t *testing.T, d *redisDriver, r driver.Request) driver.Grant {
	t.Helper()
	g, err := d.Acquire(t.Context(), r)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire %v by %s: %+v, %v", r.Kind, r.Owner, g, err)
	}
	return g
}

func mustRefuse(t *testing.T, d *redisDriver, r driver.Request) {
	t.Helper()
	g, err := d.Acquire(t.Context(), r)
	if err != nil || g.Acquired {
		t.Fatalf("Acquire %v by %s: %+v, %v; want refused", r.Kind, r.Owner, g, err)
	}
}

// storeHolds is the hold count the store keeps for r's owner and kind.
func storeHolds(t *testing.T, d *redisDriver, r driver.Request) int {
	t.Helper()
	info, err := d.InspectKind(t.Context(), r.Name, r.Kind)
	if err != nil {
		t.Fatalf("InspectKind %v of %q: %v", r.Kind, r.Name, err)
	}
	n := 0
	for _, h := range info.Holders {
		if h.Owner == r.Owner && h.Kind == r.Kind {
			n += h.Holds
		}
	}
	return n
}

func mustRelease(t *testing.T, d *redisDriver, r driver.Request, g driver.Grant) {
	t.Helper()
	if err := d.Release(t.Context(), held(r, g), 1); err != nil {
		t.Fatalf("Release %v by %s: %v", r.Kind, r.Owner, err)
	}
}

type acquired struct {
	g   driver.Grant
	err error
}

func acquireAsync(ctx context.Context, d *redisDriver, r driver.Request) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		g, err := d.Acquire(ctx, r)
		ch <- acquired{g, err}
	}()
	return ch
}

// waitQueued waits until n requests are queued for the lock of r.
func waitQueued(t *testing.T, d *redisDriver, r driver.Request, n int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := d.InspectKind(t.Context(), r.Name, r.Kind)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d waiters, want %d", info.Waiters, n)
		}
	}
}

func runKindTests(t *testing.T, env kindEnv) {
	t.Run("WaitingWriterHoldsBackLaterReaders", func(t *testing.T) {
		env.t = t
		d1, d2, d3 := env.driver(), env.driver(), env.driver()
		name := kindName(t)
		r1 := req(name, "r1", driver.Shared, false)
		g1 := mustAcquire(t, d1, r1)
		w := req(name, "w", driver.Write, true)
		wc := acquireAsync(t.Context(), d2, w)
		waitQueued(t, d1, r1, 1)
		r2 := req(name, "r2", driver.Shared, false)
		mustRefuse(t, d3, r2) // a reader arriving after the writer waits
		r2.Wait = true
		rc := acquireAsync(t.Context(), d3, r2)
		waitQueued(t, d1, r1, 2)
		mustRelease(t, d1, r1, g1)
		a := <-wc
		if a.err != nil || !a.g.Acquired {
			t.Fatalf("writer: %+v, %v", a.g, a.err)
		}
		select {
		case b := <-rc:
			t.Fatalf("reader granted while the writer holds: %+v, %v", b.g, b.err)
		case <-time.After(300 * time.Millisecond):
		}
		mustRelease(t, d2, w, a.g)
		b := <-rc
		if b.err != nil || !b.g.Acquired || b.g.Token <= a.g.Token {
			t.Fatalf("reader after the writer: %+v, %v (writer's token %d)", b.g, b.err, a.g.Token)
		}
	})

	// A writer that gives up leaves the queue and serves who it held back,
	// at once: the reader here is a bare queued request that nobody
	// refreshes, so only the writer's cancel can hand it the read hold.
	t.Run("WriterGivingUpLetsReadersIn", func(t *testing.T) {
		env.t = t
		d1, d2 := env.driver(), env.driver()
		name := kindName(t)
		r1 := req(name, "r1", driver.Shared, false)
		g1 := mustAcquire(t, d1, r1)
		wctx, stop := context.WithCancel(t.Context())
		wc := acquireAsync(wctx, d2, req(name, "w", driver.Write, true))
		waitQueued(t, d1, r1, 1)
		ch := d1.prefix + ":test:" + name
		sub := d1.rdb.Subscribe(t.Context(), ch)
		defer sub.Close()
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
		k := redisnode.NewKindKeys(d1.prefix, name, driver.Shared)
		r2 := req(name, "r2", driver.Shared, true)
		id := d1.node.NewRequest()
		if g, err := d1.node.Acquire(t.Context(), k, r2.Owner, r2.Label, r2.TTL, 0, id, ch); err != nil || g.Acquired {
			t.Fatalf("reader behind the writer: %+v, %v", g, err)
		}
		stop()
		if a := <-wc; a.err == nil {
			t.Fatalf("writer whose ctx ended: %+v", a.g)
		}
		mctx, mstop := context.WithTimeout(t.Context(), 5*time.Second)
		defer mstop()
		m, err := sub.ReceiveMessage(mctx)
		if err != nil {
			t.Fatalf("no handoff to the reader queued behind a writer that gave up: %v", err)
		}
		if want := "h" + id + " "; len(m.Payload) <= len(want) || m.Payload[:len(want)] != want {
			t.Fatalf("handoff message %q; want one for %s", m.Payload, id)
		}
		g, err := d1.node.Acquire(t.Context(), k, r2.Owner, r2.Label, r2.TTL, 0, id, ch)
		if err != nil || !g.Acquired {
			t.Fatalf("the reader's proof of the handoff: %+v, %v", g, err)
		}
		mustRelease(t, d1, r2, driver.Grant{Token: g.Token, Handle: k})
		mustRelease(t, d1, r1, g1)
	})

	// A handoff is a claim about the past: a waiter that reads it after the
	// handed hold ran out (paused, here: a bare queued request nobody
	// refreshes) must not be granted by it once another took its place. A
	// semaphore of 2 permits, one held throughout, so the keys live on.
	t.Run("StaleHandoffIsNoGrant", func(t *testing.T) {
		env.t = t
		d1, d2 := env.driver(), env.driver()
		name := kindName(t)
		perm := func(owner string) driver.Request {
			r := req(name, owner, driver.Permit, false)
			r.Limit = 2
			return r
		}
		mustAcquire(t, d2, perm("long"))
		a := perm("a")
		ga := mustAcquire(t, d1, a)
		ch := d1.prefix + ":test:" + name
		sub := d1.rdb.Subscribe(t.Context(), ch)
		defer sub.Close()
		if _, err := sub.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
		k := redisnode.NewKindKeys(d1.prefix, name, driver.Permit)
		x := perm("x")
		x.TTL = 300 * time.Millisecond
		id := d1.node.NewRequest()
		g, err := d1.node.Acquire(t.Context(), k, x.Owner, x.Label, x.TTL, 2, id, ch)
		if err != nil || g.Acquired {
			t.Fatalf("waiter for a permit: %+v, %v", g, err)
		}
		mustRelease(t, d1, a, ga)
		m, err := sub.ReceiveMessage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var tok uint64
		if _, err := fmt.Sscanf(m.Payload, "h"+id+" %d", &tok); err != nil {
			t.Fatalf("handoff message %q: %v", m.Payload, err)
		}
		time.Sleep(500 * time.Millisecond) // the handed permit (300 ms) runs out unclaimed
		// Its record is still in the hash (no script ran since): a renewal
		// must see that its lease ended.
		if res := d1.Renew(t.Context(), []driver.Held{{Name: name, Owner: x.Owner, TTL: time.Second, Kind: driver.Permit,
			Token: tok, Handle: k}}); !errors.Is(res[0].Err, driver.ErrLeaseLost) {
			t.Fatalf("renewal of a handed permit whose lease ran out: %v; want ErrLeaseLost", res[0].Err)
		}
		y := perm("y")
		gy := mustAcquire(t, d2, y)
		g, err = d1.node.Acquire(t.Context(), k, x.Owner, x.Label, x.TTL, 2, id, ch)
		if err != nil || g.Acquired {
			t.Fatalf("the late waiter was granted a third permit of 2: %+v, %v", g, err)
		}
		if err := d1.node.Cancel(t.Context(), k, x.Owner, id, false); err != nil {
			t.Fatal(err)
		}
		mustRelease(t, d2, y, gy)
		if info, _ := d1.InspectKind(t.Context(), name, driver.Permit); len(info.Holders) != 1 || info.Waiters != 0 {
			t.Fatalf("after all but one gave up or released: %+v", info)
		}
	})

	t.Run("ReentryCounts", func(t *testing.T) {
		env.t = t
		d := env.driver()
		name := kindName(t)
		for _, kind := range []driver.Kind{driver.Shared, driver.Write, driver.Permit} {
			r := req(name, "o", kind, false)
			g1, g2 := mustAcquire(t, d, r), mustAcquire(t, d, r)
			if g2.Holds != 2 || g2.Token != g1.Token {
				t.Errorf("%v re-entry: %+v after %+v; want 2 holds, same token", kind, g2, g1)
			}
			if err := d.Release(t.Context(), held(r, g1), 1); err != nil {
				t.Errorf("%v release of 1 of 2: %v", kind, err)
			}
			if left := storeHolds(t, d, r); left != 1 {
				t.Errorf("%v release of 1 of 2 left %d holds in the store; want 1", kind, left)
			}
			if err := d.Release(t.Context(), held(r, g1), 1); err != nil {
				t.Errorf("%v last release: %v", kind, err)
			}
			if left := storeHolds(t, d, r); left != 0 {
				t.Errorf("%v last release left %d holds in the store; want 0", kind, left)
			}
			if err := d.Release(t.Context(), held(r, g1), 1); !errors.Is(err, driver.ErrLeaseLost) {
				t.Errorf("%v release of a released hold: %v; want ErrLeaseLost", kind, err)
			}
		}
	})

	t.Run("SemaphoreLimit", func(t *testing.T) {
		env.t = t
		d1, d2 := env.driver(), env.driver()
		name := kindName(t)
		var rs []driver.Request
		var gs []driver.Grant
		seen := map[uint64]bool{}
		for i := range 3 {
			r := req(name, fmt.Sprint("p", i), driver.Permit, false)
			g := mustAcquire(t, []*redisDriver{d1, d2}[i%2], r)
			if seen[g.Token] {
				t.Errorf("token %d given twice", g.Token)
			}
			seen[g.Token] = true
			rs, gs = append(rs, r), append(gs, g)
		}
		r4 := req(name, "p3", driver.Permit, false)
		mustRefuse(t, d2, r4)
		other := r4
		other.Limit = 4
		if _, err := d2.Acquire(t.Context(), other); !errors.Is(err, driver.ErrLimitMismatch) {
			t.Fatalf("a request with 4 permits beside holders of 3: %v; want ErrLimitMismatch", err)
		}
		other.Wait = true
		if _, err := d2.Acquire(t.Context(), other); !errors.Is(err, driver.ErrLimitMismatch) {
			t.Fatalf("a waiting request with 4 permits beside holders of 3: %v; want ErrLimitMismatch", err)
		}
		info, err := d1.InspectKind(t.Context(), name, driver.Permit)
		if err != nil || info.Limit != 3 || len(info.Holders) != 3 || info.Kind != driver.Permit {
			t.Fatalf("InspectKind: %+v, %v", info, err)
		}
		for _, h := range info.Holders {
			if h.Kind != driver.Permit || h.Label != "label-"+h.Owner || h.Holds != 1 || h.TTL <= 0 || !seen[h.Token] {
				t.Errorf("holder %+v", h)
			}
		}
		r4.Wait = true
		c4 := acquireAsync(t.Context(), d2, r4)
		waitQueued(t, d1, r4, 1)
		mustRelease(t, d1, rs[0], gs[0])
		a := <-c4
		if a.err != nil || !a.g.Acquired || seen[a.g.Token] {
			t.Fatalf("waiting permit after a release: %+v, %v", a.g, a.err)
		}
		rs[0], gs[0] = r4, a.g
		for i := range rs {
			mustRelease(t, []*redisDriver{d1, d2}[i%2], rs[i], gs[i])
		}
		// With no live holder, another count replaces the old.
		g := mustAcquire(t, d1, other)
		info, _ = d1.InspectKind(t.Context(), name, driver.Permit)
		if info.Limit != 4 {
			t.Errorf("limit after reopening with 4: %d", info.Limit)
		}
		mustRelease(t, d1, other, g)
	})

	t.Run("DeadHoldIsFreedAndNotRenewed", func(t *testing.T) {
		env.t = t
		d1, d2 := env.driver(), env.driver()
		name := kindName(t)
		r := req(name, "dead", driver.Shared, false)
		r.TTL = 300 * time.Millisecond
		g := mustAcquire(t, d1, r)
		w := req(name, "w", driver.Write, true)
		start := time.Now()
		gw, err := d2.Acquire(t.Context(), w) // granted once the reader's lease runs out
		if err != nil || !gw.Acquired {
			t.Fatalf("writer: %+v, %v", gw, err)
		}
		if waited := time.Since(start); waited < 250*time.Millisecond {
			t.Errorf("writer granted after %v, before the reader's 300 ms lease ended", waited)
		}
		res := d1.Renew(t.Context(), []driver.Held{held(r, g)})
		if !errors.Is(res[0].Err, driver.ErrLeaseLost) {
			t.Errorf("renewal of an expired read hold: %v; want ErrLeaseLost", res[0].Err)
		}
		res = d2.Renew(t.Context(), []driver.Held{held(w, gw)})
		if res[0].Err != nil {
			t.Errorf("renewal of the write hold: %v", res[0].Err)
		}
	})

	t.Run("RenewManyKinds", func(t *testing.T) {
		env.t = t
		d := env.driver()
		name := kindName(t)
		var hs []driver.Held
		for _, r := range []driver.Request{req(name, "m", driver.Exclusive, false), req(name, "r", driver.Shared, false),
			req(name+"b", "w", driver.Write, false), req(name, "p", driver.Permit, false)} {
			r.TTL = 400 * time.Millisecond
			g := mustAcquire(t, d, r)
			h := held(r, g)
			h.TTL = 3 * time.Second
			hs = append(hs, h)
		}
		for i, res := range d.Renew(t.Context(), hs) {
			if res.Err != nil {
				t.Errorf("renew %v: %v", hs[i].Kind, res.Err)
			}
		}
		time.Sleep(800 * time.Millisecond) // past the first TTL: only the renewal keeps them
		for _, h := range hs {
			if h.Kind == driver.Exclusive {
				continue
			}
			info, err := d.InspectKind(t.Context(), h.Name, h.Kind)
			if err != nil || !info.Held || info.Holders[0].TTL < time.Second {
				t.Errorf("%v after renewal: %+v, %v", h.Kind, info, err)
			}
		}
		if err := d.Release(t.Context(), hs[1], 1); err != nil {
			t.Error(err)
		}
		hs[1].Token++ // another hold's token: not renewed
		if res := d.Renew(t.Context(), hs[1:2]); !errors.Is(res[0].Err, driver.ErrLeaseLost) {
			t.Errorf("renewal of a released read hold: %v", res[0].Err)
		}
	})

	t.Run("InspectReadWrite", func(t *testing.T) {
		env.t = t
		d := env.driver()
		name := kindName(t)
		r1, r2 := req(name, "r1", driver.Shared, false), req(name, "r2", driver.Shared, false)
		g1, g2 := mustAcquire(t, d, r1), mustAcquire(t, d, r2)
		info, err := d.InspectKind(t.Context(), name, driver.Write)
		if err != nil || !info.Held || len(info.Holders) != 2 || info.Kind != driver.Shared || info.Token != g2.Token || info.Owner != "r2" {
			t.Fatalf("InspectKind with two readers: %+v, %v", info, err)
		}
		mustRelease(t, d, r1, g1)
		mustRelease(t, d, r2, g2)
		w := req(name, "w", driver.Write, false)
		gw := mustAcquire(t, d, w)
		info, err = d.InspectKind(t.Context(), name, driver.Shared)
		if err != nil || info.Kind != driver.Write || info.Owner != "w" || info.Label != "label-w" || info.Token != gw.Token {
			t.Fatalf("InspectKind with a writer: %+v, %v", info, err)
		}
		mustRelease(t, d, w, gw)
		if info, _ = d.InspectKind(t.Context(), name, driver.Shared); info.Held || len(info.Holders) != 0 {
			t.Fatalf("InspectKind after release: %+v", info)
		}
	})

	// Contention: 8 holders over 2 clients; the store never lets more than
	// the limit in at once (semaphore), nor a writer beside anyone (rwlock).
	t.Run("Contention", func(t *testing.T) {
		env.t = t
		ds := []*redisDriver{env.driver(), env.driver()}
		name := kindName(t)
		var inside, readers, writers, maxInside, maxReaders atomic.Int64
		var bad atomic.Value
		note := func(format string, args ...any) { bad.CompareAndSwap(nil, fmt.Sprintf(format, args...)) }
		raise := func(m *atomic.Int64, v int64) {
			for o := m.Load(); v > o && !m.CompareAndSwap(o, v); o = m.Load() {
			}
		}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := ds[i%2]
				for j := range 12 {
					// semaphore
					r := req(name, fmt.Sprint("p", i), driver.Permit, true)
					g, err := d.Acquire(t.Context(), r)
					if err != nil || !g.Acquired {
						note("permit: %+v, %v", g, err)
						return
					}
					n := inside.Add(1)
					raise(&maxInside, n)
					if n > int64(r.Limit) {
						note("%d permit holders at once", n)
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					if err := d.Release(t.Context(), held(r, g), 1); err != nil {
						note("release permit: %v", err)
					}
					// read-write lock: one in four goes for the write hold
					kind := driver.Shared
					if (i+j)%4 == 0 {
						kind = driver.Write
					}
					r = req(name, fmt.Sprint("o", i), kind, true)
					g, err = d.Acquire(t.Context(), r)
					if err != nil || !g.Acquired {
						note("%v: %+v, %v", kind, g, err)
						return
					}
					if kind == driver.Write {
						if w := writers.Add(1); w != 1 || readers.Load() != 0 {
							note("writer beside %d writers and %d readers", w-1, readers.Load())
						}
						time.Sleep(time.Millisecond)
						writers.Add(-1)
					} else {
						n := readers.Add(1)
						raise(&maxReaders, n)
						if writers.Load() != 0 {
							note("reader beside a writer")
						}
						time.Sleep(time.Millisecond)
						readers.Add(-1)
					}
					if err := d.Release(t.Context(), held(r, g), 1); err != nil {
						note("release %v: %v", kind, err)
					}
				}
			}()
		}
		wg.Wait()
		if v := bad.Load(); v != nil {
			t.Fatal(v)
		}
		t.Logf("at most %d permit holders and %d readers at once", maxInside.Load(), maxReaders.Load())
	})
}

func TestKindsSingle(t *testing.T) {
	srv := testserver.Redis(t)
	runKindTests(t, kindEnv{newRDB: func() redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	}})
}

func TestKindsCluster(t *testing.T) {
	nodes := testserver.RedisCluster(t, 3)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	runKindTests(t, kindEnv{newRDB: func() redis.UniversalClient {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	}})
}

func TestKindsSentinel(t *testing.T) {
	master := testserver.Redis(t)
	sentinel := testserver.RedisSentinel(t, master, "mymaster")
	runKindTests(t, kindEnv{newRDB: func() redis.UniversalClient {
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster",
			SentinelAddrs: []string{sentinel.Addr()}, ContextTimeoutEnabled: true})
	}})
}
