package etcdlock_test

import (
	"context"
	"testing"
	"time"
)

// A read-write lock's or semaphore's contender whose put is held back
// (lateRequests), retried through a new connection and granted, then
// unlocked: the held-back put lands after the unlock and creates the key
// again under A's live session, a hold of nobody's. It stayed for as long as
// A's client was open (60 s in an adversary's run): B waited for ever. The
// mutex had a sweeper for it (TestLatePutLeavesNoPhantomHold); the kinds
// now have one too, once the contender is done with its key.
func TestLateKindPutLeavesNoPhantomHold(t *testing.T) {
	for _, k := range dropKinds[1:] { // write, read, permit
		t.Run(k.name, func(t *testing.T) {
			lr := newLateRequests(t)
			lr.startKindSession(k)
			lr.holdBack()
			l, err := k.contender(lr.a, lr.name).TryLock(t.Context())
			if err != nil {
				t.Fatalf("A's TryLock through the delay: %v", err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			lr.holderLocksAfterLatePuts(k)
		})
	}
}

// The same held-back put, of a TryLock whose ctx ended (1 s) before any
// answer: whether it failed or was granted and unlocked, once the put has
// landed B takes the lock.
func TestLateKindPutOfEndedTryLeavesNoHold(t *testing.T) {
	for _, k := range dropKinds[1:3] { // write, read (a permit's held-back put fails its limit check)
		t.Run(k.name, func(t *testing.T) {
			lr := newLateRequests(t)
			lr.startKindSession(k)
			lr.holdBack()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			l, err := k.contender(lr.a, lr.name).TryLock(ctx)
			cancel()
			if err == nil {
				_ = l.Unlock(t.Context())
			}
			t.Logf("A's TryLock with 1 s: %v", err)
			lr.holderLocksAfterLatePuts(k)
		})
	}
}

// startKindSession has A lock and unlock a name of kind k (not lr.name),
// so that its session lease is granted, and the first request held back
// is the contender's put.
func (lr *lateRequests) startKindSession(k dropKind) {
	l, err := k.contender(lr.a, lr.name+"-warm").Lock(lr.t.Context())
	if err != nil {
		lr.t.Fatal(err)
	}
	if err := l.Unlock(lr.t.Context()); err != nil {
		lr.t.Fatal(err)
	}
}

// holderLocksAfterLatePuts waits until every request held back has landed,
// then has B take lr.name as k's holder (the write lock, the only permit)
// within 8 s.
func (lr *lateRequests) holderLocksAfterLatePuts(k dropKind) {
	t := lr.t
	<-lr.lifted
	time.Sleep(time.Until(lr.t0.Add(2*lateDelay + 500*time.Millisecond)))
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	l, err := k.holder(lr.b, lr.name).Lock(ctx)
	if err != nil {
		info, _ := k.inspect(t.Context(), lr.b, lr.name)
		t.Fatalf("B's Lock once A's held-back put landed: %v; the store has %+v", err, info)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
