package natslock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/nats-io/nats.go"
)

// closeBound bounds how long a driver call may take to return after Close:
// a liveness bound, far below the TTLs and deadlines the calls would
// otherwise wait out.
const closeBound = 10 * time.Second

func openDriver(t *testing.T, url string, owned bool) *natsDriver {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d, err := newDriver(t.Context(), nc, Options{Bucket: "closing", CloseConn: owned})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func returns[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(closeBound):
		t.Fatalf("%s still running %v after Close", what, closeBound)
		panic("unreachable")
	}
}

// A release after Close (as the client makes for a grant that arrives as
// it closes) fails at once with ErrClosed: it does not retry on a closed
// connection until its TTL ends.
func TestReleaseAfterClose(t *testing.T) {
	url := testserver.NATSInProcess(t)
	d := openDriver(t, url, true)
	req := driver.Request{Name: "after-close", Owner: "o", TTL: time.Hour, Kind: driver.Exclusive}
	g, err := d.Acquire(t.Context(), req)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	_ = d.Close()
	held := driver.Held{Name: req.Name, Owner: req.Owner, TTL: req.TTL, Kind: req.Kind, Token: g.Token, Handle: g.Handle}
	err = returns(t, "Release", func() error { return d.Release(context.Background(), held, 1) })
	if !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Release after Close = %v; want ErrClosed", err)
	}
	for _, r := range d.Renew(context.Background(), []driver.Held{held}) {
		if !errors.Is(r.Err, dlock.ErrClosed) {
			t.Errorf("Renew after Close = %v; want ErrClosed", r.Err)
		}
	}
	if _, err := d.Acquire(context.Background(), driver.Request{Name: "other", Owner: "o", TTL: time.Hour}); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Acquire after Close = %v; want ErrClosed", err)
	}
}

// Close ends a wait in flight, on a connection the driver does not own
// (which stays open), with ErrClosed and without a grant; the connection's
// user can still take the lock the waiter queued for once it is free.
func TestCloseEndsWait(t *testing.T) {
	url := testserver.NATSInProcess(t)
	holder := openDriver(t, url, true)
	waiter := openDriver(t, url, false)
	req := driver.Request{Name: "wait-close", Owner: "h", TTL: time.Hour, Kind: driver.Exclusive}
	g, err := holder.Acquire(t.Context(), req)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire = %+v, %v", g, err)
	}
	type result struct {
		g   driver.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := waiter.Acquire(context.Background(), driver.Request{Name: req.Name, Owner: "w", TTL: time.Hour,
			Kind: driver.Exclusive, Wait: true})
		done <- result{g, err}
	}()
	// Queued: the waiter's queue key is in the bucket.
	for {
		if _, n, _, err := holder.queue(t.Context(), req.Name); err == nil && n == 1 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the wait ended before Close: %+v, %v", r.g, r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	_ = waiter.Close()
	r := returns(t, "a waiting Acquire", func() result { return <-done })
	if r.g.Acquired || !errors.Is(r.err, dlock.ErrClosed) {
		t.Fatalf("wait ended by Close = %+v, %v; want ErrClosed", r.g, r.err)
	}
}
