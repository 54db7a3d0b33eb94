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
	// ContextWithLease(nil ctx, a live lease) panicked.
	held, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := dlock.ContextWithLease(nilCtx, held); got != nil {
		t.Errorf("ContextWithLease(nil, l) = %v; want nil", got)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Lead(nil fn) panicked after winning, leaving the term held until
	// its TTL; now nothing is campaigned for.
	e := c.Election("leader")
	if err := e.Lead(ctx, "me", nil); !errors.Is(err, dlock.ErrInvalidConfig) || !errors.As(err, new(*dlock.Error)) {
		t.Errorf("Lead(nil fn) = %v; want a *dlock.Error wrapping ErrInvalidConfig", err)
	}
	if ld, err := e.Leader(ctx); err == nil {
		t.Errorf("after Lead(nil fn): leader %+v; want none", ld)
	}
	// Do(nil fn) took nothing: the lock is free.
	l, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("after Do(nil fn): %v", err)
	}
	_ = l.Unlock(ctx)
}

// A failed Lock or Campaign returns a nil *Lease or *Term: each of its
// methods is safe and says it holds nothing (a deferred Unlock written
// before the error check, a select on Done, used to panic).
func TestNilLeaseAndTermHoldNothing(t *testing.T) {
	ctx := context.Background()
	for _, l := range []*dlock.Lease{nil, {}} {
		if l.Name() != "" || l.Owner() != "" || l.Label() != "" || l.Token() != 0 || l.TimeLeft() != 0 || l.As(new(any)) {
			t.Errorf("%#v: a nil or zero lease reports a hold", l)
		}
		select {
		case <-l.Done():
		default:
			t.Errorf("%#v: Done is not closed", l)
		}
		for what, err := range map[string]error{"Err": l.Err(), "Unlock": l.Unlock(ctx), "Extend": l.Extend(ctx, dlock.DefaultTTL)} {
			if !errors.Is(err, dlock.ErrNotHeld) {
				t.Errorf("%#v: %s = %v; want ErrNotHeld", l, what, err)
			}
		}
		if got := dlock.ContextWithLease(ctx, l); got != ctx {
			t.Errorf("ContextWithLease(ctx, %#v) = %v; want ctx", l, got)
		}
	}
	var tm *dlock.Term
	if tm.Token() != 0 || tm.Value() != "" || tm.Lease() != nil {
		t.Error("a nil term reports a hold")
	}
	select {
	case <-tm.Done():
	default:
		t.Error("a nil term: Done is not closed")
	}
	for what, err := range map[string]error{"Err": tm.Err(), "Resign": tm.Resign(ctx), "Proclaim": tm.Proclaim(ctx, "v")} {
		if !errors.Is(err, dlock.ErrNotHeld) {
			t.Errorf("a nil term: %s = %v; want ErrNotHeld", what, err)
		}
	}
}
