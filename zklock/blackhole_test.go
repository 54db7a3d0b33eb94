package zklock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/faults"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// newBlackhole starts a faults.Proxy to target, closed at cleanup: Cut
// stops forwarding without closing anything, as a network that silently
// drops packets does (bytes already read wait in the proxy, new connections
// get no answer), and Heal forwards again, what waited first.
func newBlackhole(t *testing.T, target string) *faults.Proxy {
	t.Helper()
	p, err := faults.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// faultTimeout is the session timeout of the fault tests: long enough for
// a loaded machine, within the test server's bounds (tickTime 250ms: up to
// 5s).
const faultTimeout = 4 * time.Second

// proxied opens a dlock client whose connection goes through p.
func proxied(t *testing.T, p *faults.Proxy) *dlock.Client {
	t.Helper()
	c := openZK(t, []string{p.Addr}, faultTimeout)
	// Cut first (cleanups run last first), so that go-zookeeper's Close
	// does not wait on a dead connection.
	t.Cleanup(func() { _ = p.Close() })
	return c
}

// directClient opens a dlock client straight to the server.
func directClient(t *testing.T, addr string) *dlock.Client {
	t.Helper()
	return openZK(t, []string{addr}, faultTimeout)
}

// A holder whose traffic is silently dropped is told its lease is lost
// before the server expires its session and another client acquires: the
// driver counts the session's life from the last request the server
// answered, on its own clock, and does not wait for go-zookeeper (which
// keeps the requests queued and notices nothing until it reconnects).
func TestBlackholedHolderIsToldFirst(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	for round := range 2 {
		baseline := runtime.NumGoroutine()
		p := newBlackhole(t, srv.Addr())
		holder := proxied(t, p)
		other := directClient(t, srv.Addr())
		ctx := t.Context()
		l, err := holder.Mutex("blackhole/x", dlock.WithTTL(faultTimeout)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var zl *zklock.Lease
		if !l.As(&zl) {
			t.Fatal("Lease.As(*zklock.Lease) failed")
		}
		told, sessionLost := make(chan time.Time, 1), make(chan time.Time, 1)
		go func() { <-l.Done(); told <- time.Now() }()
		go func() {
			select {
			case <-zklock.SessionLost(zl):
				sessionLost <- time.Now()
			case <-time.After(10 * faultTimeout):
				close(sessionLost)
			}
		}()
		time.Sleep(faultTimeout / 2) // some renewals go through first
		cut := time.Now()
		p.Cut()

		lctx, cancel := context.WithTimeout(ctx, 4*faultTimeout)
		ol, err := other.Mutex("blackhole/x").Lock(lctx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: the other client did not acquire after the holder was cut off: %v", round, err)
		}
		acquired := time.Now()
		select {
		case at := <-told:
			if !at.Before(acquired) {
				t.Errorf("round %d: the holder was told %v after another client acquired", round, at.Sub(acquired))
			}
			t.Logf("round %d: cut at 0; holder told at %v; other acquired at %v (margin %v)",
				round, at.Sub(cut).Round(time.Millisecond), acquired.Sub(cut).Round(time.Millisecond), acquired.Sub(at).Round(time.Millisecond))
		case <-time.After(2 * faultTimeout):
			t.Fatalf("round %d: the holder's Done still open %v after another client acquired (Err %v)", round, 2*faultTimeout, l.Err())
		}
		// The session's own signal (Grant.Lost), which does not depend on
		// the renewals, comes first too.
		if at, ok := <-sessionLost; !ok || !at.Before(acquired) {
			t.Errorf("round %d: the session's Lost channel closed %v after another client acquired (closed: %v)", round, at.Sub(acquired), ok)
		} else {
			t.Logf("round %d: the session's Lost channel closed at %v (margin %v)", round, at.Sub(cut).Round(time.Millisecond), acquired.Sub(at).Round(time.Millisecond))
		}
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Errorf("round %d: holder's Err = %v; want ErrLeaseLost", round, l.Err())
		}
		if err := ol.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		// Renewals given up while unanswered leave no goroutine behind
		// once the clients are closed.
		_ = p.Close()
		_ = holder.Close()
		_ = other.Close()
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > baseline {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("round %d: %d goroutines after closing, %d before:\n%s", round, runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// A Lock made by a client whose session the server expired while the
// client was cut off (as a paused process is): go-zookeeper sends the
// create only after it has opened a new session. The attempt that gives up
// on the old session deletes the node it made in the new one, and its
// retry leaves no node of its own behind: a node left in the live session
// would hold the lock for as long as the client runs.
func TestSessionExpiryDuringLock(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p := newBlackhole(t, srv.Addr())
	a := proxied(t, p)
	b := directClient(t, srv.Addr())
	raw := rawConn(t, srv.Addr())
	ctx := t.Context()
	const name = "expiry/x"
	children := func() []string {
		t.Helper()
		c, _, err := raw.Children("/" + name)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatal(err)
		}
		return c
	}
	within := func(d time.Duration, what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v (children %v)", what, d, children())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	la, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var zl *zklock.Lease
	if !la.As(&zl) {
		t.Fatal("Lease.As(*zklock.Lease) failed")
	}
	p.Cut()
	within(3*faultTimeout, "the server expires the cut-off session", func() bool {
		ok, _, err := raw.Exists(zl.Path)
		return err == nil && !ok
	})
	lb, err := b.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// a, still cut off, calls Lock: its create waits in go-zookeeper's
	// queue, and goes out once go-zookeeper has learnt that its session
	// expired and opened a new one.
	type result struct {
		l   *dlock.Lease
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	lctx, cancel := context.WithTimeout(ctx, 10*faultTimeout)
	defer cancel()
	go func() {
		l, err := a.Mutex(name).Lock(lctx)
		got <- result{l, err, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond)
	p.Heal()
	within(3*faultTimeout, "a's node is queued behind b's", func() bool { return len(children()) >= 2 })
	time.Sleep(faultTimeout / 4) // let a settle: a retry, if any, goes out now
	released := time.Now()
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(faultTimeout + 2*time.Second):
		t.Fatalf("a did not acquire within %v of b's release: children %v", faultTimeout+2*time.Second, children())
	}
	if r.err != nil {
		t.Fatalf("a's Lock: %v", r.err)
	}
	t.Logf("a acquired %v after b released", r.at.Sub(released).Round(time.Millisecond))
	if c := children(); len(c) != 1 {
		t.Errorf("while a holds: children %v; want only a's node", c)
	}
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	within(faultTimeout, "no node is left after a's Unlock", func() bool { return len(children()) == 0 })
	lb, err = b.Mutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("b's TryLock after a's Unlock: %v", err)
	}
	_ = lb.Unlock(ctx)
}

// Renew returns when its ctx ends, whether or not ZooKeeper answers:
// go-zookeeper takes no ctx and would hold the check until it drops the
// connection (2/3 of the session timeout without a reply).
func TestRenewFollowsCtx(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p := newBlackhole(t, srv.Addr())
	c := proxied(t, p)
	ctx := t.Context()
	l, err := c.Mutex("renewctx/x", dlock.WithoutRenewal(), dlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := zklock.Renew(rctx, c, l); err != nil {
		t.Fatalf("renew with the connection up: %v", err)
	}
	p.Cut()
	for i := range 3 { // the second and third wait for the first's check
		rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := zklock.Renew(rctx, c, l)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("renew %d with the connection cut: %v; want an error wrapping its ctx's", i, err)
		}
		if errors.Is(err, dlock.ErrLeaseLost) {
			t.Fatalf("renew %d: %v; a check that is not answered is not a loss", i, err)
		}
	}
}

// A client opened from a URL that asks for a longer session timeout than
// the server grants (the test server allows at most 5s) counts its leases
// with the granted one: asked 10s, a cut-off holder is still told before
// the server expires its session, 5s after it last heard from it.
func TestGrantedSessionTimeout(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p := newBlackhole(t, srv.Addr())
	holder, err := dlock.Open(t.Context(), "zk://"+p.Addr+"/?session_timeout=10s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(); _ = holder.Close() })
	other := directClient(t, srv.Addr())
	ctx := t.Context()
	l, err := holder.Mutex("granted/x", dlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan time.Time, 1)
	go func() { <-l.Done(); told <- time.Now() }()
	time.Sleep(time.Second)
	cut := time.Now()
	p.Cut()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	ol, err := other.Mutex("granted/x").Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("the other client did not acquire after the holder was cut off: %v", err)
	}
	acquired := time.Now()
	defer func() { _ = ol.Unlock(ctx) }()
	select {
	case at := <-told:
		if !at.Before(acquired) {
			t.Errorf("the holder was told %v after another client acquired", at.Sub(acquired))
		}
		t.Logf("cut at 0; holder told at %v; other acquired at %v (margin %v)",
			at.Sub(cut).Round(time.Millisecond), acquired.Sub(cut).Round(time.Millisecond), acquired.Sub(at).Round(time.Millisecond))
	case <-time.After(15 * time.Second):
		t.Fatalf("the holder's Done still open 15s after another client acquired")
	}
}
