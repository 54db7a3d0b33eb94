package redislock_test

// A handoff's message is only a wake-up; the waiter proves every grant with
// a call to the store. These tests pause a waiter (as SIGSTOP or a GC pause
// would) while the lock is handed to it, let the handed lock expire and the
// name's token counter go back (a restart without persistence; a counter
// retired as docs/design.md "Per-name state that stays" describes), and
// check that the old message, read on resuming, does not make a second
// holder. (They were written against a change, since reverted, that took a
// message whose token was above the counter as proof of the grant.)

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// staleHandoffRig pauses a waiter (the pause hook, as SIGSTOP or a GC pause
// would) while the lock is handed to it, so the handoff's message reaches
// its client but is read only when it resumes.
type staleHandoffRig struct {
	srv    *testserver.Server
	name   string
	ttl    time.Duration
	waiter *dlock.Client
	wm     *dlock.Mutex
	w      <-chan lockResult
	resume chan struct{}
	handed dlock.Info
}

// handToPausedWaiter locks name with holder, queues the waiter, pauses it
// before its next refresh, then unlocks: the lock is handed to the paused
// waiter, and its message is published to the waiter's client (which a
// subscriber of our own sees).
func handToPausedWaiter(t *testing.T, srv *testserver.Server, name string, ttl time.Duration) *staleHandoffRig {
	t.Helper()
	ctx := t.Context()
	holder, admin := openURL(t, srv), openURL(t, srv)
	r := &staleHandoffRig{srv: srv, name: name, ttl: ttl, waiter: openURL(t, srv), resume: make(chan struct{})}

	// Our own subscriber sees every handoff message of the default prefix.
	sub := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = sub.Close() })
	ps := sub.PSubscribe(ctx, "dlock:handoffs:*")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}

	l, err := holder.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.wm = r.waiter.Mutex(name, dlock.WithTTL(ttl), dlock.WithOwner(dlock.NewOwnerID()))
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	r.w = lockAsync(wctx, r.wm)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := admin.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the waiter did not queue in 10 s: %+v", info)
		}
	}
	var armed atomic.Bool
	paused := make(chan struct{})
	redislock.SetPauseHook(func(n string) {
		if n == name && armed.CompareAndSwap(true, false) {
			close(paused)
			<-r.resume
		}
	})
	t.Cleanup(func() {
		redislock.SetPauseHook(nil)
		r.Resume()
	})
	armed.Store(true)
	select {
	case <-paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not come to refresh its place")
	}
	if err := l.Unlock(ctx); err != nil { // handed to the paused waiter
		t.Fatal(err)
	}
	if r.handed, err = admin.Inspect(ctx, name); err != nil {
		t.Fatal(err)
	}
	if !r.handed.Held || r.handed.Owner != r.wm.Owner() {
		t.Fatalf("the release did not hand the lock to the waiter: %+v", r.handed)
	}
	if _, err := ps.ReceiveMessage(ctx); err != nil { // published; the waiter's client reads it too
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the waiter's hub dispatch it (setup only, not asserted)
	return r
}

// Resume lets the paused waiter go on (once).
func (r *staleHandoffRig) Resume() {
	select {
	case <-r.resume:
	default:
		close(r.resume)
	}
}

// expectNoSecondHolder resumes the waiter while o holds the lock and fails
// if its Lock returns a lease before o lets go.
func (r *staleHandoffRig) expectNoSecondHolder(t *testing.T, admin *dlock.Client, o *dlock.Lease) {
	t.Helper()
	ctx := t.Context()
	r.Resume()
	select {
	case res := <-r.w:
		if res.err != nil {
			t.Fatalf("the resumed waiter's Lock failed: %v", res.err)
		}
		info, _ := admin.Inspect(ctx, r.name)
		t.Errorf("MUTUAL EXCLUSION BROKEN: the resumed waiter's Lock returned a lease (token %d, %v left, err %v) "+
			"while another client holds the lock (token %d, lease err %v); the store has %+v",
			res.l.Token(), res.l.TimeLeft().Round(time.Millisecond), res.l.Err(), o.Token(), o.Err(), info)
		_ = res.l.Unlock(ctx)
	case <-time.After(3 * r.ttl): // well past the waiter's next refresh
	}
}

// A Redis restart without persistence (the testserver's, and Redis's default
// without AOF) while a handoff's message waits, unread, in a paused waiter's
// client. The handed lock expires first, so when Redis restarts nobody holds
// the lock: the restart loses no lock, only the token counter (which the
// package doc says lets tokens repeat). Another client then takes the lock
// with token 1, and the resumed waiter's refresh queues behind it and sees
// counter 1. The old message's token (2) is above that, so the waiter takes
// the lock on the message's word, although the store says another client
// holds it: two valid leases. Before 49c3518 the waiter proved every grant
// with a call to the store, which finds the other holder, and it waits on.
func TestStaleHandoffAfterRestartIsNotAGrant(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	const name = "adv-restart"
	r := handToPausedWaiter(t, srv, name, 500*time.Millisecond)
	if r.handed.Token < 2 {
		t.Fatalf("handoff token %d; want 2 or more", r.handed.Token)
	}
	r.waitFree(t)

	srv.Stop() // no persistence: the counter is gone (no lock was held)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	other, admin := openURL(t, srv), openURL(t, srv)
	o, err := other.Mutex(name, dlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Unlock(ctx) }()
	if o.Token() >= r.handed.Token {
		t.Fatalf("after the restart the other client's token is %d; want below the handoff's %d (the counter restarted)", o.Token(), r.handed.Token)
	}
	r.expectNoSecondHolder(t, admin, o)
}

// waitFree waits until the lock handed to the paused waiter has expired
// unrenewed, and Inspect shows the name free with nobody queued.
func (r *staleHandoffRig) waitFree(t *testing.T) {
	t.Helper()
	admin := openURL(t, r.srv)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := admin.Inspect(t.Context(), r.name)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held && info.Waiters == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the handed lock did not expire: %+v", info)
		}
	}
}

// The same with Redis keeping its data, but the name's token counter
// retired as docs/design.md ("Per-name state that stays") describes for
// redis: "DEL <prefix>:{<name>}:token once dlock inspect NAME shows it free".
// The waiter is paused (nothing of it is in the store: its handed lock
// expired, and its place went with the handoff), so Inspect shows the name
// free. The doc says retiring a counter risks at worst liveness; with the
// message taken as proof, it breaks mutual exclusion.
func TestStaleHandoffAfterCounterRetiredIsNotAGrant(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	const name = "adv-retired"
	ttl := 500 * time.Millisecond
	r := handToPausedWaiter(t, srv, name, ttl)
	other, admin := openURL(t, srv), openURL(t, srv)
	r.waitFree(t) // "once dlock inspect NAME shows it free"
	raw := rawClient(t, srv)
	if n, err := raw.Del(ctx, "dlock:{"+name+"}:token").Result(); err != nil || n != 1 {
		t.Fatalf("DEL of the counter: %d, %v", n, err)
	}
	o, err := other.Mutex(name, dlock.WithTTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = o.Unlock(ctx) }()
	r.expectNoSecondHolder(t, admin, o)
}

// Client.Close while its waiter is being handed the lock: the waiter's Lock
// ends (ErrClosed, or a lease that Close then ends), and once Close has
// returned nothing of the waiter is left in the store: Close waits for the
// acquisition under way to undo its grant or leave the queue while the
// driver is still open. (Before, the driver could be closed first: the
// lock stayed handed to a waiter that was gone, up to the handoff's 3 s cap,
// or the waiter's 30 s TTL if its proving call had run.) Several rounds,
// the Close racing the Unlock.
func TestCloseDuringHandoff(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	const name = "adv-close"
	holder, other := openURL(t, srv), openURL(t, srv)
	for round := range 5 {
		l, err := holder.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := dlock.Open(ctx, "redis://"+srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		w := lockAsync(ctx, c.Mutex(name))
		time.Sleep(time.Duration(20+round*5) * time.Millisecond) // setup: let it queue
		done := make(chan struct{})
		go func() { defer close(done); _ = c.Close() }()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		<-done
		select {
		case r := <-w:
			if r.err == nil && r.l.Err() == nil {
				t.Errorf("round %d: a lease of a closed client reads valid", round)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the closed client's Lock did not return", round)
		}
		// Close returned, and so did Unlock: whatever the closed client's
		// waiter was handed or granted, Close undid it in the store.
		if info, err := other.Inspect(ctx, name); err != nil || info.Held || info.Waiters != 0 {
			t.Fatalf("round %d: after the holder's Unlock and the waiter's client's Close, the store has %+v, %v; want the lock free and nobody queued",
				round, info, err)
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		o, err := other.Mutex(name).Lock(octx)
		cancel()
		if err != nil {
			t.Fatalf("round %d: after the waiter's client closed, another client could not get the lock: %v", round, err)
		}
		if err := o.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
