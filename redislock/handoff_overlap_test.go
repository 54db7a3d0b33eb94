package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// lagDialer dials Redis directly, and slows the reads of a connection that
// has sent SUBSCRIBE (the hub's pub/sub connection) by a random delay up to
// max: handoff messages reach the waiter late, while its acquire calls are
// not slowed.
type lagDialer struct{ max time.Duration }

func (d lagDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &lagConn{Conn: c, max: d.max}, nil
}

type lagConn struct {
	net.Conn
	max    time.Duration
	pubsub atomic.Bool
}

func (c *lagConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToUpper(b), []byte("SUBSCRIBE")) {
		c.pubsub.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *lagConn) Read(b []byte) (int, error) {
	if c.pubsub.Load() && c.max > 0 {
		time.Sleep(rand.N(c.max))
	}
	return c.Conn.Read(b)
}

// overlapChecker is the shared resource the holders of one lock update:
// each holder enters it when its Lock returns and leaves it before its
// Unlock. A holder that enters while another is inside, whose lease is
// still valid by its own client's reckoning, is two holders at once; a
// token not above the last one entered, while the newer lease is valid, is
// a fencing token going back. (A lease that its client already declared
// lost is no longer a holder: dlock signals loss before the store's expiry,
// so a later grant finds it lost.)
type overlapChecker struct {
	mu     sync.Mutex
	cur    *dlock.Lease
	last   uint64
	grants int
	lost   int
	errs   []string
}

func (c *overlapChecker) fail(format string, a ...any) {
	if len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Sprintf(format, a...))
	}
}

func (c *overlapChecker) enter(l *dlock.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants++
	if p := c.cur; p != nil && p.Err() == nil && l.Err() == nil {
		c.fail("two holders: token %d entered while token %d's lease is valid (%v left)", l.Token(), p.Token(), p.TimeLeft())
	}
	if l.Token() <= c.last && l.Err() == nil {
		c.fail("token %d entered after token %d", l.Token(), c.last)
	}
	c.last = max(c.last, l.Token())
	c.cur = l
}

func (c *overlapChecker) leave(l *dlock.Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.Err() != nil {
		c.lost++
	}
	if c.cur == l {
		c.cur = nil
	}
}

type overlapRun struct {
	clients, perClient int
	dur                time.Duration
	pauseMax           time.Duration // a waiter pauses before a refresh, one time in 3, up to this long
	lag                time.Duration // the waiters' pub/sub reads are late by up to this
	cancelMax          time.Duration // one Lock in 3 gives up after up to this long (ctx around a handoff)
	killPubsub         time.Duration // the server drops every pub/sub connection this often
}

// contenderOpts are the leases the contenders take, in turn: renewed
// leases with TTLs below, at and above the handoff's 3 s cap, very short
// ones, and unrenewed ones below the cap (those above it never take a
// handoff on a message's word).
var contenderOpts = [][]dlock.Option{
	{dlock.WithTTL(30 * time.Second)},
	{dlock.WithTTL(200 * time.Millisecond)},
	{dlock.WithTTL(50 * time.Millisecond)},
	{dlock.WithTTL(100 * time.Millisecond), dlock.WithoutRenewal()},
	{dlock.WithTTL(2 * time.Second), dlock.WithoutRenewal()},
	{dlock.WithTTL(3 * time.Second)},
	{dlock.WithTTL(20 * time.Millisecond)},
	{dlock.WithTTL(10 * time.Second), dlock.WithoutRenewal()},
	{dlock.WithTTL(10 * time.Millisecond)},
	{dlock.WithTTL(30 * time.Millisecond), dlock.WithoutRenewal()},
}

func runOverlap(t *testing.T, srv *testserver.Server, name string, r overlapRun) {
	ctx := t.Context()
	var chk overlapChecker
	admin := openURL(t, srv)
	if r.pauseMax > 0 {
		redislock.SetPauseHook(func(n string) {
			if n == name && rand.N(3) == 0 {
				time.Sleep(rand.N(r.pauseMax))
			}
		})
		t.Cleanup(func() { redislock.SetPauseHook(nil) })
	}
	var proofs, inspected, mismatched, gaveUp atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(r.dur)
	if r.killPubsub > 0 {
		raw := rawClient(t, srv)
		wg.Go(func() {
			for time.Now().Before(end) {
				time.Sleep(r.killPubsub)
				_ = raw.ClientKillByFilter(ctx, "TYPE", "pubsub").Err()
			}
		})
	}
	for ci := range r.clients {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: lagDialer{r.lag}.dial, ContextTimeoutEnabled: true})
		c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		for gi := range r.perClient {
			k := (ci*r.perClient + gi) % len(contenderOpts)
			opts := contenderOpts[k]
			m := c.Mutex(name, opts...)
			wg.Go(func() {
				for i := 0; time.Now().Before(end); i++ {
					limit := 20 * time.Second
					if r.cancelMax > 0 && rand.N(3) == 0 {
						limit = rand.N(r.cancelMax)
					}
					lctx, cancel := context.WithTimeout(ctx, limit)
					l, err := m.Lock(lctx)
					cancel()
					if err != nil && limit < 20*time.Second && errors.Is(err, context.DeadlineExceeded) {
						gaveUp.Add(1)
						continue
					}
					if err != nil {
						if ctx.Err() == nil {
							chk.mu.Lock()
							chk.fail("Lock: %v", err)
							chk.mu.Unlock()
						}
						return
					}
					if k == 0 && l.TimeLeft() < 3100*time.Millisecond {
						proofs.Add(1) // a message proved it: validity is the handoff's cap
					}
					chk.enter(l)
					if i%4 == 0 {
						in, err := admin.Inspect(ctx, name)
						if err == nil && l.Err() == nil {
							inspected.Add(1)
							if !in.Held || in.Token != l.Token() || in.Owner != l.Owner() {
								mismatched.Add(1)
								chk.mu.Lock()
								chk.fail("Inspect %+v disagrees with the valid lease token %d owner %s", in, l.Token(), l.Owner())
								chk.mu.Unlock()
							}
						}
					}
					time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond)
					chk.leave(l)
					if err := l.Unlock(ctx); err != nil && !errors.Is(err, dlock.ErrLeaseLost) {
						chk.mu.Lock()
						chk.fail("Unlock: %v", err)
						chk.mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	chk.mu.Lock()
	defer chk.mu.Unlock()
	t.Logf("%d grants (%d of 30 s leases proved by a message), %d leases lost while held, %d Inspects checked, %d Locks gave up",
		chk.grants, proofs.Load(), chk.lost, inspected.Load(), gaveUp.Load())
	for _, e := range chk.errs {
		t.Error(e)
	}
	if chk.grants < 20 {
		t.Errorf("only %d grants", chk.grants)
	}
	info, err := admin.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Waiters != 0 {
		t.Errorf("after every contender stopped the store has %+v; want it free with nobody queued", info)
	}
}

// Many contenders, several per client (one hub, many requests), with leases
// of every kind around the handoff's cap, take turns on one lock; no two
// valid leases may overlap, tokens must rise, and Inspect must agree with
// the holder's lease. The variants pause waiters before their refreshes
// (so handoff messages are read late) and slow the pub/sub connections.
func TestNoOverlapAroundHandoffs(t *testing.T) {
	srv := testserver.Redis(t)
	for _, tc := range []struct {
		name string
		run  overlapRun
	}{
		{"plain", overlapRun{clients: 3, perClient: 3, dur: 4 * time.Second}},
		{"paused-waiters", overlapRun{clients: 3, perClient: 3, dur: 4 * time.Second, pauseMax: 60 * time.Millisecond}},
		{"late-pubsub", overlapRun{clients: 3, perClient: 3, dur: 4 * time.Second, lag: 15 * time.Millisecond}},
		{"paused-and-late", overlapRun{clients: 4, perClient: 2, dur: 4 * time.Second, pauseMax: 40 * time.Millisecond, lag: 30 * time.Millisecond}},
		{"ctx-ends", overlapRun{clients: 3, perClient: 3, dur: 4 * time.Second, cancelMax: 30 * time.Millisecond, lag: 5 * time.Millisecond}},
		{"pubsub-dropped", overlapRun{clients: 3, perClient: 3, dur: 4 * time.Second, killPubsub: 150 * time.Millisecond, pauseMax: 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) { runOverlap(t, srv, "adv-overlap-"+tc.name, tc.run) })
	}
}
