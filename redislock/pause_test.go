package redislock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
)

type lockResult struct {
	l   *dlock.Lease
	err error
	at  time.Time
}

func lockAsync(ctx context.Context, m *dlock.Mutex) <-chan lockResult {
	ch := make(chan lockResult, 1)
	go func() {
		l, err := m.Lock(ctx)
		ch <- lockResult{l, err, time.Now()}
	}()
	return ch
}

// TestPausedWaiterIsNotGrantedAStaleHandoff: a waiter that is paused (SIGSTOP,
// a long GC pause) while the lock is handed to it finds the handoff's message
// waiting when it resumes, seconds old: the handed lock expired meanwhile and
// another client took it. Lock must not return the stale grant (two holders),
// the waiter must leave nothing queued that a later release hands the lock to
// (a hold nobody knows of), and the store's count must be the client's.
func TestPausedWaiterIsNotGrantedAStaleHandoff(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	const name = "paused-waiter"
	ttl := time.Second // a handed lock lives min(TTL, 3 s) unless its new holder renews
	holder, waiter, other, admin := openURL(t, srv), openURL(t, srv), openURL(t, srv), openURL(t, srv)

	l, err := holder.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, ok func(dlock.Info) bool) {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			info, err := admin.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if ok(info) {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("%s: not in 10 s; the lock is %+v", what, info)
			}
		}
	}
	wm := waiter.Mutex(name, dlock.WithTTL(ttl), dlock.WithOwner(dlock.NewOwnerID())) // its owner is checked below
	w := lockAsync(ctx, wm)
	waitFor("the waiter queues", func(i dlock.Info) bool { return i.Waiters == 1 })

	// Pause the waiter where it next refreshes its place; its client still
	// receives messages, as a stopped process's socket does.
	var armed atomic.Bool
	paused, resume := make(chan struct{}), make(chan struct{})
	redislock.SetPauseHook(func(n string) {
		if n == name && armed.CompareAndSwap(true, false) {
			close(paused)
			<-resume
		}
	})
	t.Cleanup(func() { redislock.SetPauseHook(nil) })
	resumed := false
	defer func() {
		if !resumed {
			close(resume)
		}
	}()
	armed.Store(true)
	select {
	case <-paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not refresh its place")
	}

	if err := l.Unlock(ctx); err != nil { // handed to the paused waiter
		t.Fatal(err)
	}
	handed, err := admin.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if !handed.Held || handed.Owner != wm.Owner() {
		t.Fatalf("the release did not hand the lock to the waiter: %+v", handed)
	}
	// The handed lock expires unrenewed; the next waiter takes it.
	var o lockResult
	select {
	case o = <-lockAsync(ctx, other.Mutex(name, dlock.WithTTL(ttl))):
	case <-time.After(10 * time.Second):
		t.Fatal("the other client did not get the lock after the handoff expired")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.l.Token() <= handed.Token {
		t.Fatalf("other's token %d is not above the handoff's %d", o.l.Token(), handed.Token)
	}

	resumed = true
	close(resume)
	select {
	case r := <-w:
		if r.err == nil {
			t.Errorf("the resumed waiter's Lock returned a lease with token %d while another client holds the lock with token %d",
				r.l.Token(), o.l.Token())
			_ = r.l.Unlock(ctx)
		} else {
			t.Errorf("the resumed waiter's Lock failed: %v", r.err)
		}
		w = nil
	case <-time.After(3 * ttl): // well past the waiter's next refresh
	}
	if w != nil {
		waitFor("the resumed waiter queues again", func(i dlock.Info) bool { return i.Waiters == 1 })
	}

	unlocked := time.Now()
	if err := o.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if w != nil {
		select {
		case r := <-w:
			if r.err != nil {
				t.Fatalf("the waiter's Lock after the other's Unlock: %v", r.err)
			}
			if r.at.Before(unlocked) || r.l.Token() <= o.l.Token() {
				t.Errorf("the waiter got token %d; want one above %d, after the other's Unlock", r.l.Token(), o.l.Token())
			}
			info, err := admin.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if !info.Held || info.Owner != r.l.Owner() || info.Holds != 1 || info.Token != r.l.Token() || info.Waiters != 0 {
				t.Errorf("store has %+v; want 1 hold by %s with token %d and nobody queued", info, r.l.Owner(), r.l.Token())
			}
			if err := r.l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiter did not get the lock after the other's Unlock")
		}
	}

	// Nothing is left behind: the lock is free, nobody queued, and a new
	// client takes it at once.
	info, err := admin.Inspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Held || info.Waiters != 0 {
		t.Errorf("after every lease was unlocked the store has %+v; want a free lock and an empty queue", info)
	}
	if !tryFree(t, admin.Mutex(name).TryLock) {
		t.Fatal("the lock is still held after every lease was unlocked")
	}
}
