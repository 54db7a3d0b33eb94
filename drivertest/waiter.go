package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Waiter is a Lock of a held name, started by StartWaiter, that the test
// expects to keep waiting: tenant tests check that nothing another tenant
// does grants or ends it.
type Waiter struct {
	done   chan error
	cancel context.CancelFunc
}

// StartWaiter starts m.Lock in a goroutine. Stop ends it; a grant is an
// error.
func StartWaiter(t *testing.T, m *dlock.Mutex) *Waiter {
	ctx, cancel := context.WithCancel(t.Context())
	w := &Waiter{done: make(chan error, 1), cancel: cancel}
	go func() {
		l, err := m.Lock(ctx)
		if err == nil {
			_ = l.Unlock(context.WithoutCancel(ctx))
			err = errors.New("granted while the lock was held")
		}
		w.done <- err
	}()
	t.Cleanup(cancel)
	return w
}

// Returned reports whether the waiter's Lock has returned, and its error.
func (w *Waiter) Returned() (bool, error) {
	select {
	case err := <-w.done:
		return true, err
	default:
		return false, nil
	}
}

// Stop fails t unless the waiter was still waiting, then cancels it and
// wants its Lock to end with context.Canceled.
func (w *Waiter) Stop(t *testing.T) {
	t.Helper()
	if ok, err := w.Returned(); ok {
		t.Fatalf("the waiter stopped waiting: %v", err)
	}
	w.cancel()
	if err := <-w.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter: %v; want it cancelled by the test", err)
	}
}

// Call is a call a test runs on a goroutine of its own (a Lock, a
// Campaign) while it does something else, then checks: started by Go.
type Call[T any] struct{ done chan callResult[T] }

type callResult[T any] struct {
	v   T
	err error
}

// Go starts f on a goroutine of its own.
func Go[T any](f func() (T, error)) *Call[T] {
	c := &Call[T]{done: make(chan callResult[T], 1)}
	go func() {
		v, err := f()
		c.done <- callResult[T]{v, err}
	}()
	return c
}

// WantPending fails t if the call returns within d: what (the call, as a
// test failure says it) was to keep waiting.
func (c *Call[T]) WantPending(t testing.TB, d time.Duration, what string) {
	t.Helper()
	select {
	case r := <-c.done:
		t.Fatalf("%s: returned %v, %v; want it still waiting", what, r.v, r.err)
	case <-time.After(d):
	}
}

// Result returns what the call returns, failing t if it has not returned
// within d.
func (c *Call[T]) Result(t testing.TB, d time.Duration, what string) (T, error) {
	t.Helper()
	select {
	case r := <-c.done:
		return r.v, r.err
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		var zero T
		return zero, nil
	}
}

// Want is Result, failing t on an error too.
func (c *Call[T]) Want(t testing.TB, d time.Duration, what string) T {
	t.Helper()
	v, err := c.Result(t, d, what)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}
