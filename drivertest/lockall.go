package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// testLockAll runs the section of dlock.LockAll and TryLockAll.
func (s *suite) testLockAll(t *testing.T) {
	s.runAll(t, []test{
		{"Contention", s.testLockAllContention},
		{"NoneOnFailure", s.testLockAllNone},
		{"GroupLoss", s.testGroupLoss},
		{"CancelledMidway", s.testLockAllCancelled},
	})
}

// 1. Eight workers lock random overlapping sets of 2–4 of 6 names, for a
// bounded time: no deadlock (every LockAll returns within 30s), exclusion
// for every name, and nothing left held at the end.
func (s *suite) testLockAllContention(t *testing.T) {
	base := lockName(t)
	names := make([]string, 6)
	for i := range names {
		names[i] = fmt.Sprintf("%s/n%d", base, i)
	}
	const workers = 8
	var (
		inUse  [6]atomic.Int32
		rounds atomic.Int64
		tries  atomic.Int64
		wg     sync.WaitGroup
	)
	stop := time.Now().Add(4 * time.Second)
	clients := make([]*dlock.Client, workers)
	for w := range workers {
		clients[w] = s.client(t)
	}
	for w := range workers {
		c := clients[w]
		wg.Go(func() {
			for time.Now().Before(stop) && !t.Failed() {
				perm := rand.Perm(len(names))[:2+rand.IntN(3)]
				ms := make([]dlock.NamedLocker, len(perm))
				for i, p := range perm {
					ms[i] = c.Mutex(names[p], dlock.WithTTL(contentionTTL))
				}
				var g *dlock.Group
				var err error
				if w%4 == 3 { // some workers only try
					g, err = dlock.TryLockAll(t.Context(), ms...)
					if errors.Is(err, dlock.ErrNotAcquired) {
						tries.Add(1)
						time.Sleep(time.Millisecond)
						continue
					}
				} else {
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					g, err = dlock.LockAll(ctx, ms...)
					cancel()
				}
				if err != nil {
					t.Errorf("LockAll (a deadlock?): %v", err)
					return
				}
				if len(g.Leases()) != len(perm) {
					t.Errorf("group of %d leases; want %d", len(g.Leases()), len(perm))
				}
				for i, p := range perm {
					if g.Leases()[i].Name() != names[p] {
						t.Errorf("lease %d is %s; want %s", i, g.Leases()[i].Name(), names[p])
					}
					if n := inUse[p].Add(1); n != 1 {
						t.Errorf("%s held by %d groups at once", names[p], n)
					}
				}
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				if err := g.Err(); err != nil {
					t.Errorf("group lost while held: %v", err)
				}
				for _, p := range perm {
					inUse[p].Add(-1)
				}
				if err := g.Unlock(t.Context()); err != nil {
					t.Errorf("Unlock: %v", err)
				}
				rounds.Add(1)
			}
		})
	}
	wg.Wait()
	check := s.client(t)
	for _, n := range names {
		if info, err := check.Inspect(t.Context(), n); err != nil || info.Held {
			t.Errorf("%s after the run: held %v (%v); want free", n, info.Held, err)
		}
	}
	t.Logf("%d groups held, %d tries refused", rounds.Load(), tries.Load())
	if rounds.Load() == 0 {
		t.Fatalf("no group was ever held")
	}
}

// 2. A LockAll or TryLockAll that cannot take every lock leaves none held.
func (s *suite) testLockAllNone(t *testing.T) {
	base := lockName(t)
	a, b := s.client(t), s.client(t)
	first, held := base+"/a", base+"/z" // first is taken before held is tried
	l := mustLock(t, a.Mutex(held, dlock.WithTTL(s.caps.TTL)))
	defer unlock(t, l)
	ms := []dlock.NamedLocker{b.Mutex(held, dlock.WithTTL(s.caps.TTL)), b.Mutex(first, dlock.WithTTL(s.caps.TTL))}
	if g, err := dlock.TryLockAll(t.Context(), ms...); !errors.Is(err, dlock.ErrNotAcquired) {
		if g != nil {
			_ = g.Unlock(t.Context())
		}
		t.Fatalf("TryLockAll with one lock held elsewhere: %v; want ErrNotAcquired", err)
	}
	wantAcquired(t, a, first)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if g, err := dlock.LockAll(ctx, ms...); !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		if g != nil {
			_ = g.Unlock(t.Context())
		}
		t.Fatalf("LockAll whose ctx ended: %v; want ErrNotAcquired and DeadlineExceeded", err)
	}
	wantAcquired(t, a, first)
	if _, err := dlock.LockAll(t.Context(), b.Mutex(first), b.Mutex(first)); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("LockAll naming a lock twice: %v; want ErrInvalidName", err)
	}
}

// 3. The group's Done closes when any member is lost, and its Err says so.
func (s *suite) testGroupLoss(t *testing.T) {
	base := lockName(t)
	c := s.client(t)
	g, err := dlock.LockAll(t.Context(), c.Mutex(base+"/x", dlock.WithTTL(s.caps.TTL)), c.Mutex(base+"/y", dlock.WithTTL(s.caps.TTL)))
	if err != nil {
		t.Fatalf("LockAll: %v", err)
	}
	if err := s.remove(t.Context(), base+"/y"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	select {
	case <-g.Done():
	case <-time.After(2*s.caps.TTL + s.caps.Slack + 5*time.Second):
		t.Fatalf("group still live after a member was removed")
	}
	if !errors.Is(g.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("group Err = %v; want ErrLeaseLost", g.Err())
	}
	if g.Leases()[0].Err() != nil {
		t.Fatalf("the member not removed ended too: %v", g.Leases()[0].Err())
	}
	if err := g.Unlock(t.Context()); !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("group Unlock after a loss: %v; want ErrLeaseLost", err)
	}
	wantAcquired(t, c, base+"/x")
}
