package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Force: an operator's ForceUnlock of a read-write lock (rw) or semaphore
// drops every hold of it, whoever holds them: each holder's lease ends with
// ErrLeaseLost within a renewal interval, a waiter in line is served with a
// token above every dropped one, the Mutex of the same name keeps its
// holder, and a force of a free lock does nothing.
func (s *suite) testKindForceUnlock(t *testing.T, rw bool) {
	name := lockName(t)
	a, b, c, op := s.client(t), s.client(t), s.client(t), s.client(t)
	ttl := dlock.WithTTL(s.caps.TTL)
	var (
		held    []*dlock.Lease
		wait    func(context.Context) (*dlock.Lease, error)
		force   func(context.Context, ...uint64) error
		inspect func(context.Context) (dlock.Info, error)
	)
	if rw {
		held = []*dlock.Lease{mustRLock(t, a.RWMutex(name, ttl)), mustRLock(t, b.RWMutex(name, ttl))}
		wait, force, inspect = c.RWMutex(name).Lock, op.RWMutex(name).ForceUnlock, op.RWMutex(name).Inspect
	} else {
		held = []*dlock.Lease{mustAcquire(t, a.Semaphore(name, 2, ttl)), mustAcquire(t, b.Semaphore(name, 2, ttl))}
		wait, force, inspect = c.Semaphore(name, 2).Acquire, op.Semaphore(name, 1).ForceUnlock, op.Semaphore(name, 1).Inspect
	}
	m := mustLock(t, a.Mutex(name, ttl))
	defer unlock(t, m)
	type result struct {
		l   *dlock.Lease
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := waitCtx(t)
	defer cancel()
	go func() {
		l, err := wait(ctx)
		got <- result{l, err}
	}()
	// The waiter is in line (where the store keeps a line it can see)
	// before the force, so the force's release must wake it.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if info, err := inspect(t.Context()); err == nil && info.Waiters > 0 {
			break
		}
	}
	select {
	case r := <-got:
		t.Fatalf("waiter served while every place was held: %v, %v", r.l, r.err)
	default:
	}
	if err := force(t.Context()); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	var w *dlock.Lease
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiter after the force: %v", r.err)
		}
		w = r.l
	case <-ctx.Done():
		t.Fatal("waiter not served after the force")
	}
	for _, l := range held {
		if w.Token() <= l.Token() {
			t.Errorf("waiter's token %d not above the dropped hold's %d", w.Token(), l.Token())
		}
		waitDone(t, l, s.caps.TTL/3+s.caps.Slack+time.Second, "force-released hold")
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Errorf("Err of a force-released hold = %v; want ErrLeaseLost", l.Err())
		}
		if err := l.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
			t.Errorf("Unlock of a force-released hold = %v; want ErrLeaseLost", err)
		}
	}
	info, err := inspect(t.Context())
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Token != w.Token() {
		t.Errorf("Inspect after the force = %+v, %v; want the waiter alone, token %d", info, err, w.Token())
	}
	if m.Err() != nil {
		t.Errorf("the Mutex of the same name was dropped too: %v", m.Err())
	}
	unlock(t, w)
	if err := force(t.Context()); err != nil {
		t.Fatalf("ForceUnlock of a free lock: %v", err)
	}
	var again *dlock.Lease
	if rw {
		again = mustWLock(t, c.RWMutex(name))
	} else {
		again = mustAcquire(t, c.Semaphore(name, 1))
	}
	if again.Token() <= w.Token() {
		t.Errorf("token %d after the force not above %d", again.Token(), w.Token())
	}
	unlock(t, again)
}

// Force with tokens: only the holds with those tokens are dropped, so that
// an operator drops no hold granted after it looked; a token nobody holds
// drops nothing.
func (s *suite) testKindForceUnlockTokens(t *testing.T, rw bool) {
	name := lockName(t)
	a, b, op := s.client(t), s.client(t), s.client(t)
	ttl := dlock.WithTTL(s.caps.TTL)
	var (
		held    []*dlock.Lease
		force   func(context.Context, ...uint64) error
		inspect func(context.Context) (dlock.Info, error)
	)
	if rw {
		held = []*dlock.Lease{mustRLock(t, a.RWMutex(name, ttl)), mustRLock(t, b.RWMutex(name, ttl))}
		force, inspect = op.RWMutex(name).ForceUnlock, op.RWMutex(name).Inspect
	} else {
		held = []*dlock.Lease{mustAcquire(t, a.Semaphore(name, 3, ttl)), mustAcquire(t, b.Semaphore(name, 3, ttl))}
		force, inspect = op.Semaphore(name, 1).ForceUnlock, op.Semaphore(name, 1).Inspect
	}
	tokens := func() []uint64 {
		t.Helper()
		info, err := inspect(t.Context())
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		var out []uint64
		for _, h := range info.Holders {
			out = append(out, h.Token)
		}
		return out
	}
	nobody := held[1].Token() + 1<<20
	if err := force(t.Context(), nobody); err != nil {
		t.Fatalf("ForceUnlock of a token nobody holds: %v", err)
	}
	if got := tokens(); len(got) != 2 {
		t.Fatalf("holders after a force of a token nobody holds: %v; want both of %d, %d", got, held[0].Token(), held[1].Token())
	}
	if err := force(t.Context(), held[0].Token()); err != nil {
		t.Fatalf("ForceUnlock(%d): %v", held[0].Token(), err)
	}
	waitDone(t, held[0], s.caps.TTL/3+s.caps.Slack+time.Second, "force-released hold")
	if !errors.Is(held[0].Err(), dlock.ErrLeaseLost) {
		t.Errorf("Err of the force-released hold = %v; want ErrLeaseLost", held[0].Err())
	}
	if got := tokens(); len(got) != 1 || got[0] != held[1].Token() || held[1].Err() != nil {
		t.Fatalf("after a force of token %d: holders %v, the other hold's Err %v; want token %d kept", held[0].Token(), got, held[1].Err(), held[1].Token())
	}
	unlock(t, held[1])
}
