package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// 1b. Goroutines sharing one *Mutex exclude each other, as with sync.Mutex:
// every Lock and TryLock is a holder of its own unless asked otherwise.
func (s *suite) testSharedMutexExcludes(t *testing.T) {
	name := lockName(t)
	m := s.client(t).Mutex(name, dlock.WithTTL(5*time.Second))
	const workers = 4
	var (
		inside, most atomic.Int32
		rounds       atomic.Int64
		wg           sync.WaitGroup
	)
	deadline := time.Now().Add(time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				l, err := m.Lock(ctx)
				cancel()
				if err != nil {
					t.Errorf("worker %d: Lock: %v", w, err)
					return
				}
				n := inside.Add(1)
				for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := l.Unlock(t.Context()); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
				rounds.Add(1)
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d goroutines sharing one Mutex were inside at once", most.Load())
	}
	if rounds.Load() < workers {
		t.Fatalf("only %d critical sections in 1s with %d workers", rounds.Load(), workers)
	}
	// TryLock through the same Mutex is refused while it is held.
	l := mustLock(t, m)
	if l2, err := m.TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock on the holder's own Mutex = %v, %v; want ErrNotAcquired", l2, err)
	}
	unlock(t, l)
}

// 8c. A nested Do of the same lock re-enters the outer hold (its ctx carries
// the lease), while a Lock with an unrelated ctx waits for it like anyone.
func (s *suite) testNestedDoReenters(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	m := a.Mutex(name)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	inner := false
	err := dlock.Do(ctx, m, func(ctx context.Context, outer *dlock.Lease) error {
		if l, err := m.TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
			return errors.Join(errors.New("TryLock without the lease's ctx was not refused"), err, unlockIf(l))
		}
		return dlock.Do(ctx, m, func(ctx context.Context, l *dlock.Lease) error {
			inner = true
			if l.Token() != outer.Token() {
				t.Errorf("nested Do token %d; want the outer hold's %d", l.Token(), outer.Token())
			}
			return nil
		})
	})
	if err != nil || !inner {
		t.Fatalf("nested Do = %v (inner ran: %v)", err, inner)
	}
	wantAcquired(t, b, name) // both holds released
}

func unlockIf(l *dlock.Lease) error {
	if l == nil {
		return nil
	}
	return l.Unlock(context.Background())
}

// 8d. Do's wait bound covers the wait only, TryOnce tries once, and a wait
// that ends with ctx matches both ErrNotAcquired and ctx's error.
func (s *suite) testDoWaitBound(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	m := a.Mutex(name)
	held := mustLock(t, b.Mutex(name))
	ran := false
	work := func(context.Context, *dlock.Lease) error { ran = true; return nil }
	err := dlock.Do(t.Context(), m, work, dlock.MaxWait(300*time.Millisecond))
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Do with MaxWait on a held lock = %v (ran %v); want ErrNotAcquired and DeadlineExceeded", err, ran)
	}
	if err := dlock.Do(t.Context(), m, work, dlock.TryOnce()); !errors.Is(err, dlock.ErrNotAcquired) || ran {
		t.Fatalf("Do with TryOnce on a held lock = %v (ran %v); want ErrNotAcquired", err, ran)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if l, err := m.Lock(ctx); !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past ctx's deadline = %v, %v; want ErrNotAcquired and DeadlineExceeded", l, err)
	}
	unlock(t, held)
	// The work outlives the wait bound: its ctx is not the wait's (it has
	// no deadline at all, since the caller's has none).
	err = dlock.Do(t.Context(), m, func(ctx context.Context, l *dlock.Lease) error {
		if d, ok := ctx.Deadline(); ok {
			return fmt.Errorf("the work's ctx ends at the wait bound's deadline (in %v)", time.Until(d).Round(time.Millisecond))
		}
		return ctx.Err()
	}, dlock.MaxWait(10*time.Second))
	if err != nil {
		t.Fatalf("work under MaxWait: %v", err)
	}
	if err := dlock.Do(t.Context(), m, work, dlock.TryOnce()); err != nil || !ran {
		t.Fatalf("Do with TryOnce on a free lock = %v (ran %v)", err, ran)
	}
}
