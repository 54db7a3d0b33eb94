package redislock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// A release hands the lock to the next waiter with one message, on that
// waiter's client's channel only: the other waiting clients are not woken,
// and nothing is published on the lock's own channel.
func TestHandoffWakesOnlyTheNextWaiter(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	spy := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer spy.Close()
	ps := spy.PSubscribe(ctx, "dlock:*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	msgs := ps.Channel()

	holder := openURL(t, srv)
	l, err := holder.Mutex("handoff").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		l   *dlock.Lease
		err error
	}
	var waiters []chan got
	for range 3 { // queued in this order, each in a client of its own
		c := openURL(t, srv)
		ch := make(chan got, 1)
		go func() {
			l, err := c.Mutex("handoff").Lock(ctx)
			ch <- got{l, err}
		}()
		waiters = append(waiters, ch)
		want := len(waiters)
		for {
			info, err := holder.Inspect(ctx, "handoff")
			if err != nil {
				t.Fatal(err)
			}
			if info.Waiters == want {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	seen := map[string]bool{}
	for i, w := range waiters {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		var g got
		select {
		case g = <-w:
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d was not handed the lock", i)
		}
		if g.err != nil {
			t.Fatal(g.err)
		}
		l = g.l
		for _, other := range waiters[i+1:] {
			if len(other) > 0 {
				t.Fatalf("a later waiter got the lock with waiter %d", i)
			}
		}
		select {
		case m := <-msgs:
			if !strings.HasPrefix(m.Channel, "dlock:handoffs:") || seen[m.Channel] {
				t.Fatalf("handoff %d announced on %s (channels so far %v); want a new client's channel", i, m.Channel, seen)
			}
			seen[m.Channel] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("no message for handoff %d", i)
		}
		select {
		case m := <-msgs:
			t.Fatalf("handoff %d: a second message, %q on %s", i, m.Payload, m.Channel)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		t.Fatalf("a release with nobody waiting published %q on %s", m.Payload, m.Channel)
	case <-time.After(50 * time.Millisecond):
	}
}

// A lock handed to a waiter carries the waiter's label, from the moment the
// release hands it over (the waiter's place in the queue keeps its label),
// and a re-entry keeps the label of the hold's first acquire.
func TestHandoffAndReentryLabels(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	holder, waiter, admin := openURL(t, srv), openURL(t, srv), openURL(t, srv)
	l, err := holder.Mutex("labels", dlock.WithOwner("shared"), dlock.WithLabel("first")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, err := holder.Mutex("labels", dlock.WithOwner("shared"), dlock.WithLabel("second")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := admin.Inspect(ctx, "labels"); err != nil || info.Holds != 2 || info.Label != "first" {
		t.Fatalf("Inspect after a re-entry = %+v, %v; want 2 holds labelled %q", info, err, "first")
	}
	waiting := drivertest.Go(func() (*dlock.Lease, error) { return waiter.Mutex("labels", dlock.WithLabel("waiter")).Lock(ctx) })
	for {
		info, err := admin.Inspect(ctx, "labels")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil { // the release hands the lock over
		t.Fatal(err)
	}
	info, err := admin.Inspect(ctx, "labels")
	if err != nil || !info.Held || info.Owner == "shared" || info.Label != "waiter" {
		t.Fatalf("Inspect after the handoff = %+v, %v; want it held with the waiter's label %q", info, err, "waiter")
	}
	w := waiting.Want(t, 10*time.Second, "the waiter's Lock")
	info, err = admin.Inspect(ctx, "labels")
	if err != nil || info.Owner != w.Owner() || info.Label != "waiter" || w.Label() != "waiter" {
		t.Fatalf("Inspect of the waiter's lease = %+v, %v; want its owner %s and label %q", info, err, w.Owner(), "waiter")
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
