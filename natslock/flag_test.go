package natslock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// openN opens n clients of one bucket on srv, closed when the test ends.
func openN(t *testing.T, ctx context.Context, srv *testserver.Server, bucket string, n int) []*dlock.Client {
	t.Helper()
	h := &harness{url: "nats://" + srv.Addr(), bucket: bucket}
	cs := make([]*dlock.Client, n)
	for i := range cs {
		c, err := h.NewClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs[i] = c
	}
	return cs
}

// A holder that does not renew extends its lease; a waiter then flags its
// key. The flag keeps the key's life from the TTL the value states, which
// was the grant's: it cut the key to about 5 s under a lease of 60, and
// the waiter was granted while the holder's lease still ran (an adversary
// pass: two holders at once).
func TestFlagKeepsExtendedTTL(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cs := openN(t, ctx, testserver.NATSProcess(t), "extend", 2)
	const name = "extend"
	la, err := cs[0].Mutex(name, dlock.WithTTL(5*time.Second), dlock.WithoutRenewal()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Extend(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	if info, err := cs[1].Inspect(ctx, name); err != nil || info.TTL < 50*time.Second {
		t.Errorf("Inspect after Extend(60s): TTL %v, %v; want about 60 s", info.TTL, err)
	}
	// B waits past the grant's 5 s TTL (and the flag's second), well
	// within the extended lease.
	bctx, bcancel := context.WithTimeout(ctx, 12*time.Second)
	defer bcancel()
	lb, err := cs[1].Mutex(name, dlock.WithTTL(5*time.Second)).Lock(bctx)
	if err == nil {
		t.Fatalf("B granted (token %d) while A's extended lease has %v left (A.Err() = %v): two holders",
			lb.Token(), la.TimeLeft().Round(time.Second), la.Err())
	}
	if la.Err() != nil {
		t.Fatalf("A's lease: %v", la.Err())
	}
}

// The head of the queue that creates a removed lock's key while others
// wait keeps the flag: its release hands the lock to the next waiter. It
// used to purge the key, and a Lock begun after that waiter had queued
// took the lock ahead of it (an adversary pass).
func TestHeadThatCreatesHandsOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cs := openN(t, ctx, testserver.NATSProcess(t), "head", 4)
	a, b, c, d := cs[0], cs[1], cs[2], cs[3]
	const name = "head"
	opt := dlock.WithTTL(10 * time.Second)
	if _, err := a.Mutex(name, opt).TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	bl := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.Mutex(name, opt).Lock(ctx)
		if err != nil {
			t.Error(err)
			close(bl)
			return
		}
		order <- "B"
		bl <- l
	}()
	waitQueued(t, ctx, a, name)
	cdone := make(chan struct{})
	go func() {
		defer close(cdone)
		l, err := c.Mutex(name, opt).Lock(ctx)
		if err != nil {
			t.Error(err)
			return
		}
		order <- "C"
		_ = l.Unlock(ctx)
	}()
	for {
		info, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The key goes with C still queued: B, the head, creates it.
	if err := a.ForceUnlock(ctx, name); err != nil {
		t.Fatal(err)
	}
	lb, ok := <-bl
	if !ok {
		t.FailNow()
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ld, err := d.Mutex(name, opt).Lock(ctx) // begun after C queued
	if err != nil {
		t.Fatal(err)
	}
	order <- "D"
	_ = ld.Unlock(ctx)
	<-cdone
	got := []string{<-order, <-order, <-order}
	if got[1] != "C" {
		t.Errorf("grants in the order %v: D, begun after C had queued, came before C", got)
	}
}
