package redislock

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// While a release stays unconfirmed (the server is down), every attempt of
// its owner on that lock is refused before it reaches the store, leaving
// nothing to undo: the node remembers the one release, not one more call
// per attempt; once the server is back, the next attempt settles it.
func TestPendingStaysBoundedDuringOutage(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: 200 * time.Millisecond})
	d, err := newDriver(ctx, rdb, Options{}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	req := driver.Request{Name: "outage", Owner: "o1", TTL: time.Second}
	g, err := d.Acquire(ctx, req)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	srv.Stop()
	if err := d.Release(ctx, driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Token: g.Token, Handle: g.Handle}, 1); err == nil {
		t.Fatal("Release succeeded with the server down")
	}
	pending := func() int { return d.node.Pending(d.node.Keys(req.Name), req.Owner) }
	if n := pending(); n != 1 {
		t.Fatalf("%d calls remembered after the failed release; want 1", n)
	}
	for _, wait := range []bool{false, true, false, true} {
		r := req
		r.Wait = wait
		actx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if g, err := d.Acquire(actx, r); err == nil && g.Acquired {
			t.Fatal("acquired with the server down")
		}
		cancel()
	}
	if n := pending(); n != 1 {
		t.Errorf("%d calls remembered after 4 attempts in the outage; want still 1", n)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	g, err = d.Acquire(ctx, req)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire after the outage: %+v, %v", g, err)
	}
	if n := pending(); n != 0 {
		t.Errorf("%d calls still remembered after a successful attempt; want 0", n)
	}
}
