package dlock

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// One scheduler renews every lease of a client in one driver call per tick,
// and the number of goroutines does not grow with the number of leases.
func TestRenewalIsBatched(t *testing.T) {
	d := newFake()
	c := New(d, "fake")
	defer c.Close()
	ctx := t.Context()
	const n = 1000
	const ttl = 300 * time.Millisecond
	before := runtime.NumGoroutine()
	leases := make([]*Lease, 0, n)
	taking := time.Now()
	for i := range n {
		l, err := c.Mutex(fmt.Sprintf("batch/%d", i), WithTTL(ttl)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	spread := time.Since(taking) // leases taken this far apart fall due this far apart
	if g := runtime.NumGoroutine() - before; g > 2 {
		t.Errorf("%d more goroutines with %d leases held", g, n)
	}
	start := d.renews.Load()
	time.Sleep(3 * ttl)
	calls := d.renews.Load() - start
	// Every lease is renewed every ttl/3, 9 times in 3 TTLs. Leases due
	// within a tenth of an interval of each other share a batch, so the
	// batches per interval are bounded by how far apart the leases were
	// taken (a few ms normally, more under -race on a loaded machine) — and
	// never by their number: unbatched, this would be about 9,000 calls.
	window := ttl / 3 / 10
	perInterval := int64(spread/window) + 2
	if calls < 6 || calls > 9*perInterval || calls > n/10 {
		t.Errorf("%d Renew calls for %d leases taken over %v, over 3 TTLs; want at most %d (one batch per %v of spread per interval)",
			calls, n, spread, 9*perInterval, window)
	}
	t.Logf("%d Renew calls for %d leases taken over %v", calls, n, spread)
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease lost: %v", l.Err())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A renewal that fails for an uncertain reason is retried, and the lease
// survives if the store comes back before the lease could expire.
func TestUncertainRenewalFailureRecovers(t *testing.T) {
	d := newFake()
	c := New(d, "fake")
	defer c.Close()
	const ttl = 600 * time.Millisecond
	l, err := c.Mutex("flaky", WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d.cut.Store(true)
	time.Sleep(ttl / 2) // the renewal due at ttl/3 fails
	d.cut.Store(false)
	time.Sleep(ttl)
	if l.Err() != nil {
		t.Fatalf("lease lost after a short outage: %v", l.Err())
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Waiters of one client for one name queue locally: a release makes one of
// them try, not all of them.
func TestNoHerdWithinClient(t *testing.T) {
	d := newFake()
	holder, waiters := New(d, "fake"), New(d, "fake")
	defer holder.Close()
	defer waiters.Close()
	ctx := t.Context()
	l, err := holder.Mutex("herd").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	got := make(chan *Lease)
	base := d.acquires.Load()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiters.Mutex("herd", WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- l
		}()
	}
	for d.acquires.Load()-base < n { // every waiter made its first attempt
		time.Sleep(time.Millisecond)
	}
	base = d.acquires.Load()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := (<-got).Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// n handoffs: each takes the head's attempt, plus at most one more for
	// the next head's first try after subscribing.
	if calls := d.acquires.Load() - base; calls > 2*n+1 {
		t.Errorf("%d acquire attempts for %d handoffs: waiters are stampeding", calls, n)
	}
}
