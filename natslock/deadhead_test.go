package natslock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go"
)

// deadHeadClient opens a client on its own connection, which the returned
// Cutter cuts (a process that dies).
func deadHeadClient(t *testing.T, url string) (*dlock.Client, *drivertest.Cutter) {
	t.Helper()
	cu := &drivertest.Cutter{}
	nc, err := connect(url, nats.SetCustomDialer(dialer{cu}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := natslock.Open(t.Context(), nc, natslock.Options{Bucket: "deadhead", CloseConn: true})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, cu
}

// Waiters watch only the lock's key. When it is gone (its holder died)
// and the head of the queue is a dead waiter, the others see that head and
// wait; the dead head's queue key then expires, which writes nothing to
// the lock's key. The next waiter used to notice only at its own keepalive
// tick, TTL/3 later (10 s at the default TTL), with the lock free; it now
// steps again when the head's place ends. (A helper's adversary pass.)
func TestDeadHeadOfQueueDoesNotStallAFreeLock(t *testing.T) {
	url := testserver.NATSInProcess(t)
	ctx := t.Context()
	const name = "dead-head"
	h, hcut := deadHeadClient(t, url)
	w1, w1cut := deadHeadClient(t, url)
	w2, _ := deadHeadClient(t, url)

	if _, err := h.Mutex(name, dlock.WithTTL(2*time.Second)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w1ctx, w1stop := context.WithCancel(ctx)
	defer w1stop()
	go func() { _, _ = w1.Mutex(name, dlock.WithTTL(4*time.Second)).Lock(w1ctx) }()
	waitQueued(t, ctx, w2, name)
	time.Sleep(200 * time.Millisecond)
	got := make(chan time.Time, 1)
	go func() {
		// The default TTL: its keepalive tick is every 10 s.
		if _, err := w2.Mutex(name, dlock.WithTTL(dlock.DefaultTTL)).Lock(ctx); err != nil {
			t.Error(err)
		}
		got <- time.Now()
	}()
	waitWaiters(t, ctx, w2, name, 2)
	time.Sleep(300 * time.Millisecond) // W2 has flagged and is waiting
	// The holder and the head waiter die: neither renews nor leaves.
	t0 := time.Now()
	hcut.Cut()
	w1cut.Cut()
	// The lock's key expires within 2 s of t0, W1's queue key within 4 s.
	freeBy := t0.Add(4*time.Second + 500*time.Millisecond)
	// Free with waiters queued: Inspect counts them, as it does while the
	// lock is held. W2 stays queued until it holds the lock; W1's place,
	// last rewritten at most a third of its TTL before the cut, lasts at
	// least 2.6 s past it.
	for {
		info, err := w2.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held {
			want := 1
			if time.Since(t0) < 2600*time.Millisecond {
				want = 2
			}
			if info.Waiters < want {
				t.Errorf("Inspect of the free lock %v after the cut: %d waiters, want at least %d", time.Since(t0), info.Waiters, want)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case at := <-got:
		t.Logf("W2 got the lock %v after the holder and head died; the lock was free and W1's place gone by %v",
			at.Sub(t0), freeBy.Sub(t0))
		if at.After(freeBy.Add(2 * time.Second)) { // liveness: it took W2's keepalive tick, 10 s
			t.Errorf("W2 waited %v past the expiry of the dead head's place, with the lock free", at.Sub(freeBy))
		}
	case <-time.After(40 * time.Second):
		t.Fatal("W2 never got the lock")
	}
}

// A head of the queue that gives up (alive: its ctx ends) while the lock's
// key is gone purges its queue key, which writes nothing to the lock's key
// either. The next waiter watches the head's key while the head has a free
// lock to take, and steps again when it goes; it used to sleep until its
// own keepalive tick (7.4 s here, up to TTL/3). (An adversary pass.)
func TestHeadGivingUpOnAFreeLockWakesTheNext(t *testing.T) {
	url := testserver.NATSInProcess(t)
	ctx := t.Context()
	const name = "head-gives-up"
	open := func(u string) *dlock.Client {
		nc, err := connect(u)
		if err != nil {
			t.Fatal(err)
		}
		c, err := natslock.Open(ctx, nc, natslock.Options{Bucket: "giveup", CloseConn: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	px := testserver.NewProxy(t, strings.TrimPrefix(url, "nats://"))
	h := open(url)
	w1 := open("nats://" + px.Addr())
	w2 := open(url)
	if _, err := h.Mutex(name, dlock.WithTTL(dlock.DefaultTTL)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w1ctx, w1stop := context.WithCancel(ctx)
	w1done := make(chan error, 1)
	go func() {
		_, err := w1.Mutex(name, dlock.WithTTL(dlock.DefaultTTL)).Lock(w1ctx)
		w1done <- err
	}()
	waitQueued(t, ctx, w2, name)
	time.Sleep(200 * time.Millisecond)
	got := make(chan time.Time, 1)
	go func() {
		l, err := w2.Mutex(name, dlock.WithTTL(dlock.DefaultTTL)).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- time.Now()
		if l != nil {
			_ = l.Unlock(context.Background())
		}
	}()
	waitWaiters(t, ctx, w2, name, 2)
	time.Sleep(300 * time.Millisecond)
	// W1 is alive but slow: its traffic takes 600 ms each way.
	px.SetDelay(600 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	if err := h.ForceUnlock(ctx, name); err != nil { // the lock's key goes; W1 heads the queue
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	w1stop() // the head gives up before it has seen the key go
	err := <-w1done
	t.Logf("W1 returned %v at %v", err, time.Since(t0))
	px.SetDelay(0)
	freeAt := time.Now()
	select {
	case at := <-got:
		t.Logf("W2 got the lock %v after W1 left (%v after the force unlock)", at.Sub(freeAt), at.Sub(t0))
		if at.Sub(freeAt) > 2*time.Second { // liveness: it took W2's keepalive tick
			t.Errorf("W2 slept %v on a free lock after the head left", at.Sub(freeAt))
		}
	case <-time.After(40 * time.Second):
		t.Fatal("W2 never got the lock")
	}
}

// The head of a free lock's queue is alive, on a link of 300 ms each way,
// well under the 2 s the package doc names. Its step (a read, the queue's
// read, and a create on a key that keeps the force release's purge marker,
// three round trips in nats.go) was bounded by 2 s as a whole: it never
// fit, the create's deadline came back as "the key exists", and nobody
// took the lock in 25 s (the waiter behind watches the live head). Each
// call is bounded on its own now. (An adversary pass.)
func TestSlowHeadTakesAFreeLock(t *testing.T) {
	url := testserver.NATSInProcess(t)
	ctx := t.Context()
	const name = "slow-head"
	px := testserver.NewProxy(t, strings.TrimPrefix(url, "nats://"))
	h, _ := deadHeadClient(t, url)
	w1, _ := deadHeadClient(t, "nats://"+px.Addr())
	w2, _ := deadHeadClient(t, url)
	if _, err := h.Mutex(name).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 2)
	for i, c := range []*dlock.Client{w1, w2} {
		go func() {
			l, err := c.Mutex(name).Lock(ctx)
			got <- err
			if l != nil {
				_ = l.Unlock(context.Background())
			}
		}()
		waitWaiters(t, ctx, h, name, i+1) // W1 heads the queue
	}
	time.Sleep(300 * time.Millisecond) // W2 has flagged and is waiting
	px.SetDelay(300 * time.Millisecond)
	time.Sleep(600 * time.Millisecond)
	t0 := time.Now()
	if err := h.ForceUnlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the free lock was taken %v after the force release", time.Since(t0))
	case <-time.After(15 * time.Second): // liveness: about 6 round trips of 0.6 s are needed
		t.Fatal("nobody took the free lock within 15 s of its force release")
	}
	px.SetDelay(0)
}
