package memlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// A Lost hook may close the client, also when the loss is found inside a
// Lock: a re-entry that finds the lock taken by another owner (after a
// force unlock). Close waited for the TryLock that ran the hook, the 10 s
// of its drain, and the TryLock then said ErrClosed (an adversary pass).
func TestLostHookClosesClientInsideLock(t *testing.T) {
	const url = "mem://lost-hook-close"
	var a *dlock.Client
	closed := make(chan error, 1)
	a, err := dlock.Open(t.Context(), url, dlock.WithHooks(dlock.Hooks{Lost: func(context.Context, dlock.Event) { closed <- a.Close() }}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := dlock.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m := a.Mutex("x", dlock.WithOwner("svc-1"), dlock.WithTTL(time.Minute))
	if _, err := m.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.ForceUnlock(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Mutex("x", dlock.WithTTL(time.Minute)).Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	tried := make(chan error, 1)
	go func() {
		_, err := m.TryLock(t.Context())
		tried <- err
	}()
	select {
	case err := <-tried:
		if err == nil {
			t.Fatal("TryLock of a lock another owner holds succeeded")
		}
	case <-time.After(5 * time.Second): // it took 10 s
		t.Fatal("TryLock whose Lost hook closed the client did not return within 5 s")
	}
	if err := <-closed; err != nil && !errors.Is(err, dlock.ErrLeaseLost) {
		t.Errorf("Close from the Lost hook: %v", err)
	}
}
