package natslock_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// Waiters of different clients are served in the order they queued: each
// release hands the lock to the waiter that queued first, and the tokens
// increase along the line.
func TestFIFOAcrossClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	h := &harness{url: "nats://" + testserver.NATSProcess(t).Addr(), bucket: "fifo"}
	open := func() *dlock.Client {
		c, err := h.NewClient(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	const name, n = "fifo", 5
	holder := open()
	first, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		i   int
		tok uint64
	}
	grants := make(chan grant, n)
	for i := range n {
		c := open()
		go func() {
			l, err := c.Mutex(name).Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				grants <- grant{i: -1}
				return
			}
			grants <- grant{i, l.Token()}
			_ = l.Unlock(ctx)
		}()
		for { // the next waiter queues only once this one is in line
			info, err := holder.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiters == i+1 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiter %d never queued", i)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var order []int
	last := first.Token()
	for range n {
		g := <-grants
		order = append(order, g.i)
		if g.tok <= last {
			t.Errorf("token %d after %d", g.tok, last)
		}
		last = g.tok
	}
	if want := []int{0, 1, 2, 3, 4}; !slices.Equal(order, want) {
		t.Fatalf("served in order %v; want %v", order, want)
	}
}

// A server restart (file storage keeps the keys) while a waiter is queued:
// the holder's lease is lost and the waiter gets the lock once its key has
// expired, within the TTL plus a few seconds.
func TestQueueSurvivesRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	srv := testserver.NATSProcess(t)
	h := &harness{url: "nats://" + srv.Addr(), bucket: "restart"}
	a, err := h.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := h.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const ttl = 2 * time.Second
	la, err := a.Mutex("r", dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.Mutex("r", dlock.WithTTL(ttl)).Lock(ctx)
		if err == nil {
			defer l.Unlock(ctx)
		}
		got <- err
	}()
	for {
		if info, err := a.Inspect(ctx, "r"); err == nil && info.Waiters == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.Stop()
	time.Sleep(ttl + time.Second) // the holder's renewals fail meanwhile
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	<-la.Done()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2*ttl + 5*time.Second):
		t.Fatal("the waiter did not get the lock after the restart")
	}
}
