package sqltest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// LocksOnSmallPool has 6 goroutines lock and unlock 3 names 10 times each
// through a, a row-mode client on a pool of two connections. Each acquire
// holds a connection and takes its token on another: with every connection
// held, they waited for each other's until their ctx ended.
func LocksOnSmallPool(t *testing.T, a *dlock.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 10 {
				l, err := a.Mutex([]string{"p", "q", "r"}[(i+j)%3]).Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					t.Errorf("Lock and Unlock on a pool of two: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TryLocksOnFullPool has a, a session-mode client on a pool of two
// connections, TryLock free locks and keep them until one is refused: it
// must be refused at once (no slot), not wait for a connection until its
// ctx ends. Then Inspect must find a connection.
func TryLocksOnFullPool(t *testing.T, a *dlock.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		l, err := a.Mutex(fmt.Sprint("free-", i)).TryLock(ctx)
		if err != nil {
			if !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("TryLock of a free lock with %d held on a pool of 2: %v; want ErrNotAcquired at once", i, err)
			}
			break
		}
		defer func() { _ = l.Unlock(context.Background()) }()
	}
	if info, err := a.Inspect(ctx, "free-0"); err != nil || !info.Held {
		t.Errorf("Inspect beside a held pool = %+v, %v; want held", info, err)
	}
}
