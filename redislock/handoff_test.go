package redislock_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
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
