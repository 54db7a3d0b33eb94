package dlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock/dlock"
	_ "github.com/dlock/dlock/memlock"
)

// Nothing passed to dlock panics: a nil locker, function or lease is an
// *Error with a sentinel, and nothing is left held (finding of an adversary
// pass: each of these panicked).
func TestNilArgumentsAreErrors(t *testing.T) {
	ctx := context.Background()
	c, err := dlock.Open(ctx, "mem://nil-args")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.Mutex("jobs/nightly")
	run := func(context.Context, *dlock.Lease) error { return nil }
	var nilMutex *dlock.Mutex
	var nilRW *dlock.RWMutex
	var nilCtx context.Context
	for _, tc := range []struct {
		what string
		err  error
		want error
	}{
		{"Do(nil ctx)", dlock.Do(nilCtx, m, run), dlock.ErrNilContext},
		{"Do(nil locker)", dlock.Do(ctx, nil, run), dlock.ErrInvalidName},
		{"Do(nil *Mutex)", dlock.Do(ctx, nilMutex, run), dlock.ErrInvalidName},
		{"Do(nil *RWMutex's RLocker)", dlock.Do(ctx, nilRW.RLocker(), run), dlock.ErrInvalidName},
		{"Do(nil fn)", dlock.Do(ctx, m, nil), dlock.ErrInvalidConfig},
		{"nil Lease's Unlock", (*dlock.Lease)(nil).Unlock(ctx), dlock.ErrNotHeld},
		{"nil Lease's Extend", (*dlock.Lease)(nil).Extend(ctx, dlock.DefaultTTL), dlock.ErrNotHeld},
	} {
		var de *dlock.Error
		if !errors.Is(tc.err, tc.want) || !errors.As(tc.err, &de) {
			t.Errorf("%s = %v; want a *dlock.Error wrapping %v", tc.what, tc.err, tc.want)
		}
	}
	if err := dlock.Do(nilCtx, m, run); err == nil || !errors.As(err, new(*dlock.Error)) {
		t.Fatal(err)
	} else if de := err.(*dlock.Error); de.Name != "jobs/nightly" || de.Backend != "mem" {
		t.Errorf("Do(nil ctx)'s error names %q on %q; want the lock and its backend", de.Name, de.Backend)
	}
	if got := dlock.ContextWithLease(ctx, nil); got != ctx {
		t.Errorf("ContextWithLease(ctx, nil) = %v; want ctx", got)
	}
	// Do(nil fn) took nothing: the lock is free.
	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("after Do(nil fn): %v", err)
	}
	_ = l.Unlock(ctx)
}
