package dlock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// After contended Locks, TryLocks, re-entries and given-up waits, the client
// keeps no per-name state: no turns, no local waiters, no holds.
func TestNoStateLeftAfterContention(t *testing.T) {
	d := newFake()
	c := New(d, "fake", quiet())
	defer c.Close()
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("n"+string(rune('a'+i%2)), WithTTL(time.Second))
			for j := range 20 {
				switch j % 3 {
				case 0:
					l, err := m.Lock(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					inner, err := m.Lock(ContextWithLease(ctx, l)) // re-entry
					if err != nil {
						t.Error(err)
						return
					}
					_ = inner.Unlock(ctx)
					_ = l.Unlock(ctx)
				case 1:
					if l, err := m.TryLock(ctx); err == nil {
						_ = l.Unlock(ctx)
					}
				case 2:
					wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
					if l, err := m.Lock(wctx); err == nil {
						_ = l.Unlock(ctx)
					}
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	if n, w, holds, freeing := c.e.Leftovers(); n+w+holds+freeing != 0 {
		t.Fatalf("left behind: %d owner turns, %d local wait lines, %d holds, %d releases", n, w, holds, freeing)
	}
}
