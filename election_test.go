package dlock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	_ "github.com/dlock/dlock/memlock"
)

// memClient opens a client of a mem store of the test's own, closed when t
// ends.
func memClient(t *testing.T) *dlock.Client {
	t.Helper()
	return drivertest.MustOpen(t, "mem://"+t.Name())
}

// Observe leaves no goroutine behind, whether its loop breaks or its ctx
// ends, and a client's Close ends it with ErrClosed.
func TestObserveStops(t *testing.T) {
	c := memClient(t)
	e := c.Election("obs")
	term, err := e.Campaign(t.Context(), "v")
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for l, err := range e.Observe(t.Context()) {
		if err != nil || l.Term != term.Token() || l.Value != "v" {
			t.Fatalf("Observe: %+v, %v", l, err)
		}
		break
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range e.Observe(ctx) {
		}
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Observe ended; %d before", n, before)
	}

	var last error
	done = make(chan struct{})
	go func() {
		defer close(done)
		for _, err := range e.Observe(context.Background()) {
			last = err
		}
	}()
	time.Sleep(50 * time.Millisecond)
	_ = c.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Observe still running after Close")
	}
	if !errors.Is(last, dlock.ErrClosed) {
		t.Fatalf("Observe's last error after Close: %v; want ErrClosed", last)
	}
}

// A Campaign whose ctx ends leaves nothing behind, and errors match
// ErrNotAcquired and the ctx's error.
func TestCampaignCancelled(t *testing.T) {
	c := memClient(t)
	term, err := c.Election("e").Campaign(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = c.Election("e").Campaign(ctx, "b")
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign whose ctx ended: %v", err)
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Election("e").Leader(t.Context()); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after the only leader resigned: %v", err)
	}
	if _, err := c.Election("").Campaign(t.Context(), "x"); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}
	if _, err := c.Election("e").Campaign(t.Context(), "bad\x00value"); !errors.Is(err, dlock.ErrInvalidLabel) {
		t.Fatalf("value with NUL on the portable election: %v", err)
	}
}

// A Group's Err is nil after its Unlock, and a second Unlock says ErrNotHeld.
func TestGroupUnlock(t *testing.T) {
	c := memClient(t)
	c2 := drivertest.MustOpen(t, "mem://"+t.Name())
	// one name through two clients of one store: the group would wait for itself
	if _, err := dlock.LockAll(t.Context(), c.Mutex("a"), c2.Mutex("a")); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("LockAll of one name through two clients: %v; want ErrInvalidName", err)
	}
	g, err := dlock.LockAll(t.Context(), c.Mutex("a"), c.Mutex("b"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.Done():
	default:
		t.Fatal("Done open after Unlock")
	}
	if g.Err() != nil {
		t.Fatalf("Err after Unlock: %v", g.Err())
	}
	if err := g.Unlock(t.Context()); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v", err)
	}
	// a member unlocked on its own ends the group
	g, err = dlock.LockAll(t.Context(), c.Mutex("a"), c.Mutex("b"))
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Leases()[1].Unlock(t.Context())
	select {
	case <-g.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("group live after a member was unlocked")
	}
	if !errors.Is(g.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("Err after a member was unlocked: %v", g.Err())
	}
	_ = g.Unlock(t.Context())
	g, err = dlock.TryLockAll(t.Context(), c.Mutex("a"), c.Mutex("b"))
	if err != nil {
		t.Fatalf("locks left held: %v", err)
	}
	_ = g.Unlock(t.Context())
}
