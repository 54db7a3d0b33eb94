package sqltest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// TryBeside runs try, a TryLock, beside an outsider: a session outside
// dlock that holds something of dlock's tables (what) in an open
// transaction. The TryLock must return before its ctx of 20 s ends:
// refused (ErrNotAcquired) if refused, else with another error, and never
// granted. Once endOutsider has ended that transaction, the lock must be
// free.
func TryBeside(t *testing.T, what string, refused bool, try func(context.Context) (*dlock.Lease, error), endOutsider func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	l, err := try(ctx)
	cancel()
	t.Logf("TryLock beside %q: %v", what, err)
	switch {
	case err == nil:
		_ = l.Unlock(t.Context())
		t.Fatalf("TryLock beside %q: granted", what)
	case errors.Is(err, context.DeadlineExceeded):
		t.Fatalf("TryLock beside %q waited for the outsider until a deadline: %v", what, err)
	case refused != errors.Is(err, dlock.ErrNotAcquired):
		t.Errorf("TryLock beside %q = %v; want ErrNotAcquired: %v", what, err, refused)
	}
	if err := endOutsider(); err != nil {
		t.Fatal(err)
	}
	l, err = try(t.Context())
	if err != nil {
		t.Fatalf("TryLock once the outsider is gone: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
