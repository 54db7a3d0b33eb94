package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
)

// A node that does not confirm a waiter's subscription within its second
// (slow, or cut off for a moment) is subscribed again once it answers, as
// go-redis does after a dropped connection. It used to be left out for the
// whole wait: an announcement made only there (the cancel of a split vote's
// hold on that node) was missed, and the waiter slept out the holder's TTL,
// up to 5 s, on a free lock.
func TestSlowNodeIsSubscribedOnceItAnswers(t *testing.T) {
	addrs, px, via := threeProxied(t)
	raw := rawClients(t, addrs)
	const name = "slow-subscribe"
	h := drivertest.MustOpen(t, "redlock://"+strings.Join(addrs, ","))
	w := drivertest.MustOpen(t, "redlock://"+addrs[0]+","+addrs[1]+","+via[2]+"?node_timeout=200ms")
	if l, err := w.Mutex("warm-up").TryLock(t.Context()); err != nil { // load the scripts on every node
		t.Fatal(err)
	} else if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Mutex(name, dlock.WithTTL(30*time.Second)).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}

	px[2].SetDelay(1500 * time.Millisecond) // node 3 misses the subscription's second
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	var at time.Time
	go func() {
		l, err := w.Mutex(name).Lock(ctx)
		at = time.Now()
		if err == nil {
			_ = l.Unlock(context.Background())
		}
		got <- err
	}()
	ch := "dlock:{" + name + "}:released"
	subscribed := func(i int) bool {
		n, err := raw[i].PubSubNumSub(t.Context(), ch).Result()
		return err == nil && n[ch] > 0
	}
	deadline := time.Now().Add(10 * time.Second)
	for !subscribed(0) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never subscribed on node 1")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(1200 * time.Millisecond) // its second on node 3 is over, and it waits on the holder's TTL
	px[2].SetDelay(0)
	for !subscribed(2) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter is not subscribed on node 3 though it answers again")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The lock is freed on every node, and only node 3 says so.
	for _, r := range raw {
		if err := r.Del(t.Context(), "dlock:{"+name+"}").Err(); err != nil {
			t.Fatal(err)
		}
	}
	said := time.Now()
	if err := raw[2].Publish(t.Context(), ch, "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	t.Logf("the waiter took the lock %v after node 3 announced it free", at.Sub(said))
	if d := at.Sub(said); d > 2500*time.Millisecond {
		t.Errorf("the waiter took the lock %v after node 3 announced it free; its sleep ends 5 s after it began", d)
	}
}
