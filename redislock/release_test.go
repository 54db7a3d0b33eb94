package redislock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
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

// requestDropper breaks the connection under the next script call once
// armed, before the call reaches the server: the call fails and did not run.
type requestDropper struct{ armed atomic.Bool }

func (d *requestDropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &requestDropConn{Conn: c, d: d}, nil
}

type requestDropConn struct {
	net.Conn
	d *requestDropper
}

func (c *requestDropConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) && c.d.armed.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

// TestFailedReleaseIsNotReentered: an Unlock whose release never reached the
// store leaves the hold there (until its TTL), and the client forgets it.
// The owner's next Lock must not re-enter that hold unknowingly (the store
// would count one hold more than the client, and the lock would outlive the
// next Unlock, again and again): the failed release is completed first.
func TestFailedReleaseIsNotReentered(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &requestDropper{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: drop.dial, MaxRetries: -1, ContextTimeoutEnabled: true})
	c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other := openURL(t, srv)
	m := c.Mutex("failed-release")

	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop.armed.Store(true)
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded though its release was dropped")
	}
	if info, err := other.Inspect(ctx, "failed-release"); err != nil {
		t.Fatal(err)
	} else if !info.Held {
		t.Fatal("the dropped release ran")
	}

	l2, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	info, err := other.Inspect(ctx, "failed-release")
	if err != nil {
		t.Fatal(err)
	}
	if info.Holds != 1 || info.Token != l2.Token() || l2.Token() <= l.Token() {
		t.Errorf("the next Lock got token %d (the failed one's %d); the store has %d holds with token %d: want 1 new hold",
			l2.Token(), l.Token(), info.Holds, info.Token)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ol, err := other.Mutex("failed-release").TryLock(ctx)
	if errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal("the lock is still held after its only lease was unlocked")
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = ol.Unlock(ctx)
}

// TestLostReentryIsUndone: a re-entry that ran in the store but whose reply
// was lost fails for the caller, so its hold must not stay counted (the
// lock would outlive the owner's last Unlock), and undoing it must drop
// that one hold, not the lock the owner still holds.
func TestLostReentryIsUndone(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &replyDropper{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: drop.dial, MaxRetries: -1, ContextTimeoutEnabled: true})
	c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other := openURL(t, srv)
	const name = "lost-reentry"
	m := c.Mutex(name)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop.armed.Store(true)
	if l2, err := m.Lock(ctx); err == nil {
		_ = l2.Unlock(ctx)
		t.Fatal("the re-entry succeeded though its reply was dropped")
	}
	if drop.drops.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", drop.drops.Load())
	}
	info, err := other.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Holds != 1 || info.Token != l.Token() {
		t.Errorf("after the failed re-entry the store has %+v; want the first lease's 1 hold, token %d", info, l.Token())
	}
	if l.Err() != nil {
		t.Errorf("the first lease ended: %v", l.Err())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ol, err := other.Mutex(name).TryLock(ctx)
	if errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal("the lock is still held after its only lease was unlocked")
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = ol.Unlock(ctx)
}

// planDropper fails the next script calls as planned: "reply" lets the call
// run and loses its reply, "request" breaks the connection before the call
// is sent.
type planDropper struct {
	mu   sync.Mutex
	plan []string
}

func (d *planDropper) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &planConn{Conn: c, d: d}, nil
}

type planConn struct {
	net.Conn
	d         *planDropper
	dropReply atomic.Bool
}

func (c *planConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("evalsha")) {
		c.d.mu.Lock()
		var step string
		if len(c.d.plan) > 0 {
			step, c.d.plan = c.d.plan[0], c.d.plan[1:]
		}
		c.d.mu.Unlock()
		switch step {
		case "request":
			_ = c.Conn.Close()
			return 0, net.ErrClosed
		case "reply":
			c.dropReply.Store(true)
		}
	}
	return c.Conn.Write(b)
}

func (c *planConn) Read(b []byte) (int, error) {
	if c.dropReply.CompareAndSwap(true, false) {
		time.Sleep(50 * time.Millisecond) // the server runs the script
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// TestFailedCancelIsSentAgain: a re-entry that ran but lost its reply is
// undone by a cancel; if the cancel fails too, the store counts a hold the
// client does not have, so the cancel is sent again before the owner's next
// call on the lock, and the owner's last Unlock frees it.
func TestFailedCancelIsSentAgain(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &planDropper{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: drop.dial, MaxRetries: -1, ContextTimeoutEnabled: true})
	c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other := openURL(t, srv)
	const name = "failed-cancel"
	m := c.Mutex(name)
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	drop.mu.Lock()
	drop.plan = []string{"reply", "request"} // the re-entry's reply, then its cancel
	drop.mu.Unlock()
	if l2, err := m.Lock(ctx); err == nil {
		_ = l2.Unlock(ctx)
		t.Fatal("the re-entry succeeded though its reply was dropped")
	}
	if info, err := other.Inspect(ctx, name); err != nil {
		t.Fatal(err)
	} else if info.Holds != 2 {
		t.Fatalf("the store has %d holds; want the lost re-entry's counted (2): the test did not drop what it meant to", info.Holds)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ol, err := other.Mutex(name).TryLock(ctx)
	if errors.Is(err, dlock.ErrNotAcquired) {
		info, _ := other.Inspect(ctx, name)
		t.Fatalf("the lock is still held after its only lease was unlocked: %+v", info)
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = ol.Unlock(ctx)
}

// TestRetriedReleaseActsOnceAfterOtherChanges: owners shared across
// processes count their holds in one hash. A release that ran but lost its
// reply is sent again later; if another process of the same owner changed
// the hold in between, the retry must still see that it ran, or it takes
// away a hold that is still held, and the lock is freed under a lease.
func TestRetriedReleaseActsOnceAfterOtherChanges(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	drop := &replyDropper{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: drop.dial, MaxRetries: -1, ContextTimeoutEnabled: true})
	p1, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	p2, admin := openURL(t, srv), openURL(t, srv)
	const name = "shared-owner"
	owner := dlock.WithOwner(dlock.NewOwnerID())
	m1, m2 := p1.Mutex(name, owner), p2.Mutex(name, owner)
	if w, err := p1.Mutex("warm").Lock(ctx); err != nil { // load the scripts: a lost NOSCRIPT tests nothing
		t.Fatal(err)
	} else if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	a, err := m1.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m2.Lock(ctx) // the other process re-enters: 2 holds
	if err != nil {
		t.Fatal(err)
	}
	drop.armed.Store(true)
	if err := a.Unlock(ctx); err == nil { // runs (1 hold left), reply lost
		t.Fatal("Unlock succeeded though its reply was dropped")
	}
	if info, err := admin.Inspect(ctx, name); err != nil || info.Holds != 1 {
		t.Fatalf("after the release whose reply was lost: %+v, %v; want 1 hold", info, err)
	}
	c, err := m2.Lock(ctx) // the other process again: 2 holds
	if err != nil {
		t.Fatal(err)
	}
	d, err := m1.Lock(ctx) // settles the release, then re-enters: 3 holds
	if err != nil {
		t.Fatal(err)
	}
	info, err := admin.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Holds != 3 {
		t.Errorf("the store counts %d holds; the two processes hold 3 leases", info.Holds)
	}
	for _, l := range []*dlock.Lease{b, c} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another owner could take the lock while a lease on it is held: %v", err)
	}
	if err := d.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
