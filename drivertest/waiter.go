package drivertest

import (
	"context"
	"errors"
	"testing"

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
