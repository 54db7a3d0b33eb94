package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/memlock"
)

// LockAll and TryLockAll refuse nil lockers (an untyped nil, or a nil
// *Mutex or *RWMutex) with ErrInvalidName: they panicked in Name.
func TestLockAllRefusesNil(t *testing.T) {
	c := memlock.Open()
	t.Cleanup(func() { _ = c.Close() })
	good := c.Mutex("lockall-nil-good")
	var nilMutex *dlock.Mutex
	var nilRW *dlock.RWMutex
	for _, set := range [][]dlock.NamedLocker{{nil}, {good, nil}, {nilMutex}, {good, nilRW}} {
		for _, try := range []bool{false, true} {
			f := dlock.LockAll
			if try {
				f = dlock.TryLockAll
			}
			g, err := f(t.Context(), set...)
			if !errors.Is(err, dlock.ErrInvalidName) || !errors.As(err, new(*dlock.Error)) {
				t.Errorf("LockAll(%v) = %v, %v; want a *dlock.Error wrapping ErrInvalidName", set, g, err)
			}
		}
	}
	// LockAll's own errors are *dlock.Error too, as the package doc says
	// of every lock operation's (they were bare wrapped sentinels).
	var nilCtx context.Context
	for _, tc := range []struct {
		err  error
		want error
		name string
	}{
		{func() error { _, err := dlock.LockAll(nilCtx, good); return err }(), dlock.ErrNilContext, ""},
		{func() error { _, err := dlock.TryLockAll(t.Context(), good, c.Mutex("lockall-nil-good")); return err }(), dlock.ErrInvalidName, "lockall-nil-good"},
	} {
		var de *dlock.Error
		if !errors.Is(tc.err, tc.want) || !errors.As(tc.err, &de) || de.Name != tc.name {
			t.Errorf("got %v; want a *dlock.Error naming %q, wrapping %v", tc.err, tc.name, tc.want)
		}
	}
	// Nothing was left held by the refused calls.
	l, err := good.TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after refused LockAll: %v", err)
	}
	_ = l.Unlock(t.Context())
}

// A 1 MB name gave a 1 MB error: names over 128 bytes are cut to a prefix
// and a hash, in the message and where the cause repeats them, and two
// long names stay apart.
func TestLongNamesAreCutInErrors(t *testing.T) {
	c := memlock.Open()
	t.Cleanup(func() { _ = c.Close() })
	huge := strings.Repeat("n", 1<<20)
	_, err := c.Mutex(huge).Lock(t.Context())
	if !errors.Is(err, dlock.ErrInvalidName) || len(err.Error()) > 400 {
		t.Fatalf("Lock of a 1 MB name: %d-byte error %.300q; want ErrInvalidName in under 400 bytes", len(err.Error()), err)
	}
	var de *dlock.Error
	if !errors.As(err, &de) || de.Name != huge {
		t.Errorf("the dlock.Error does not keep the whole name")
	}
	// A cause that repeats the name (as backends' errors do) is cut too.
	long := strings.Repeat("é", 200)
	e := &dlock.Error{Op: "lock", Backend: "x", Name: long, Err: fmt.Errorf("x: release %q: %w", long, dlock.ErrLeaseLost)}
	if len(e.Error()) > 400 || strings.Contains(e.Error(), long[:200]) || !errors.Is(e, dlock.ErrLeaseLost) {
		t.Errorf("Error() = %d bytes: %q", len(e.Error()), e.Error())
	}
	other := &dlock.Error{Op: "lock", Backend: "x", Name: long + "x", Err: dlock.ErrLeaseLost}
	if e.Error() == other.Error() {
		t.Errorf("two long names give one message: %q", e.Error())
	}
	if !utf8.ValidString(e.Error()) {
		t.Errorf("Error() cut a character: %q", e.Error())
	}
	// Short names are shown whole, quoted.
	if s := (&dlock.Error{Op: "lock", Backend: "x", Name: "job", Err: dlock.ErrLeaseLost}).Error(); !strings.Contains(s, `"job"`) {
		t.Errorf("Error() = %q; want the name whole", s)
	}
}

// A TTL of MaxInt64 said "finer than the backend's resolution"; it says it
// is too long.
func TestHugeTTLSaysTooLong(t *testing.T) {
	c := memlock.Open()
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Mutex("huge-ttl", dlock.WithTTL(math.MaxInt64)).TryLock(t.Context())
	if !errors.Is(err, dlock.ErrInvalidTTL) || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("TryLock with a MaxInt64 TTL: %v; want ErrInvalidTTL saying it is too long", err)
	}
}

// A URL with a huge parameter gave an error as large (natslock's
// inbox_prefix of 70,000 bytes: a 70 KB error). The URL an error repeats
// is cut at 256 bytes.
func TestLongURLsAreCutInErrors(t *testing.T) {
	huge := strings.Repeat("é", 50_000)
	for _, u := range []string{"nosuch://host/?x=" + huge, "mem://x?" + huge + "=1"} {
		_, err := dlock.Open(t.Context(), u)
		if err == nil {
			t.Fatalf("Open of a %d-byte URL succeeded", len(u))
		}
		if msg := err.Error(); len(msg) > 2000 || !utf8.ValidString(msg) {
			t.Errorf("Open of a %d-byte URL: %d-byte error %.300q; want an error under 2,000 bytes", len(u), len(msg), msg)
		}
	}
}

// brokenLocker breaks the Locker contract: no lease and no error.
type brokenLocker struct{}

func (brokenLocker) Name() string                                  { return "lockall-broken" }
func (brokenLocker) Lock(context.Context) (*dlock.Lease, error)    { return nil, nil }
func (brokenLocker) TryLock(context.Context) (*dlock.Lease, error) { return nil, nil }

// A caller's Locker that returns (nil, nil) made LockAll panic with the
// locks taken before it left held, and Do panic: each is now an error
// wrapping ErrInvalidConfig, and nothing is left held.
func TestBrokenLockerIsAnError(t *testing.T) {
	c := memlock.Open()
	t.Cleanup(func() { _ = c.Close() })
	a := c.Mutex("lockall-a") // sorts before the broken locker's name
	for _, try := range []bool{false, true} {
		f := dlock.LockAll
		if try {
			f = dlock.TryLockAll
		}
		if _, err := f(t.Context(), a, brokenLocker{}); !errors.Is(err, dlock.ErrInvalidConfig) || !errors.As(err, new(*dlock.Error)) {
			t.Errorf("LockAll with a broken locker (try %v) = %v; want a *dlock.Error wrapping ErrInvalidConfig", try, err)
		}
	}
	ran := false
	if err := dlock.Do(t.Context(), brokenLocker{}, func(context.Context, *dlock.Lease) error { ran = true; return nil }); !errors.Is(err, dlock.ErrInvalidConfig) || ran {
		t.Errorf("Do with a broken locker = %v, ran %v; want ErrInvalidConfig, not run", err, ran)
	}
	l, err := a.TryLock(t.Context())
	if err != nil {
		t.Fatalf("after the broken LockAll: %v", err)
	}
	_ = l.Unlock(t.Context())

	// Other broken Lockers: one that panics, one that returns a lease it
	// has unlocked, one that returns a lease and an error. LockAll leaves
	// nothing held (the panic had left "lockall-a" held for good), and Do
	// does not run its function without a hold.
	other := c.Mutex("lockall-z")
	for _, lk := range []dlock.NamedLocker{
		funcLocker(func(context.Context) (*dlock.Lease, error) { panic("broken") }),
		funcLocker(func(ctx context.Context) (*dlock.Lease, error) {
			l, err := other.Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			return l, err
		}),
		funcLocker(func(ctx context.Context) (*dlock.Lease, error) {
			l, _ := other.Lock(ctx)
			return l, errors.New("broken")
		}),
	} {
		func() {
			defer func() { _ = recover() }()
			if g, err := dlock.LockAll(t.Context(), a, lk); err == nil {
				t.Errorf("LockAll with a broken locker = %v, nil", g)
				_ = g.Unlock(t.Context())
			}
		}()
		func() {
			defer func() { _ = recover() }()
			ran := false
			_ = dlock.Do(t.Context(), lk, func(context.Context, *dlock.Lease) error { ran = true; return nil })
			if ran {
				t.Error("Do ran its function with a broken locker")
			}
		}()
		for _, m := range []*dlock.Mutex{a, other} {
			l, err := m.TryLock(t.Context())
			if err != nil {
				t.Fatalf("%s held after a broken locker: %v", m.Name(), err)
			}
			_ = l.Unlock(t.Context())
		}
	}
	// A Locker that returns a lease on another lock (here one the test
	// holds) had the group returned with its own lock unheld, and Do run
	// its function: it is refused, and that lease is not the group's to
	// release.
	held, err := other.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wrong := funcLocker(func(context.Context) (*dlock.Lease, error) { return held, nil })
	if g, err := dlock.LockAll(t.Context(), a, wrong); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("LockAll with a lease on another lock = %v, %v; want ErrInvalidConfig", g, err)
	}
	if err := dlock.Do(t.Context(), wrong, func(context.Context, *dlock.Lease) error { return nil }); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("Do with a lease on another lock = %v; want ErrInvalidConfig", err)
	}
	if err := held.Unlock(t.Context()); err != nil {
		t.Errorf("the lease on another lock was released by LockAll or Do: %v", err)
	}
	// One that names one lock and locks another (a wrapper with a name of
	// its own): the lease it took in the call is given back. It stayed
	// held, renewed, until Close (an adversary pass).
	renamed := funcLocker(func(ctx context.Context) (*dlock.Lease, error) { return other.Lock(ctx) })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // the old code's leak made the second wait forever
	defer cancel()
	if g, err := dlock.LockAll(ctx, a, renamed); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("LockAll with a renaming locker = %v, %v; want ErrInvalidConfig", g, err)
	}
	if err := dlock.Do(ctx, renamed, func(context.Context, *dlock.Lease) error { return nil }); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("Do with a renaming locker = %v; want ErrInvalidConfig", err)
	}
	for _, m := range []*dlock.Mutex{a, other} {
		l, err := m.TryLock(t.Context())
		if err != nil {
			t.Fatalf("%s held after a renaming locker: %v", m.Name(), err)
		}
		_ = l.Unlock(t.Context())
	}
	// The same when its Lock re-enters a hold of the caller's (a lease in
	// ctx): the count it added is given back, the caller's lease is kept.
	// The hold's own grant was before the call, which the first fix took
	// for "the caller's lease" (an adversary pass).
	l0, err := other.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rctx := dlock.ContextWithLease(ctx, l0)
	if g, err := dlock.LockAll(rctx, a, renamed); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("LockAll with a renaming locker re-entering = %v, %v; want ErrInvalidConfig", g, err)
	}
	if err := dlock.Do(rctx, renamed, func(context.Context, *dlock.Lease) error { return nil }); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Errorf("Do with a renaming locker re-entering = %v; want ErrInvalidConfig", err)
	}
	if l0.Err() != nil {
		t.Fatalf("the caller's lease ended: %v", l0.Err())
	}
	if err := l0.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Mutex(other.Name()).TryLock(t.Context()); err != nil {
		t.Errorf("held after the caller's Unlock: a re-entry count of the renaming locker was kept: %v", err)
	} else {
		_ = l.Unlock(t.Context())
	}
	// A Locker that ends its goroutine (runtime.Goexit, as t.FailNow does)
	// left the members taken before it held for good.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		_, _ = dlock.LockAll(t.Context(), a, funcLocker(func(context.Context) (*dlock.Lease, error) {
			runtime.Goexit()
			return nil, nil
		}))
	}()
	<-exited
	if l, err := a.TryLock(t.Context()); err != nil {
		t.Errorf("held after a Locker called Goexit: %v", err)
	} else {
		_ = l.Unlock(t.Context())
	}
	// A failed LockAll's nil *Group, or a Group{}, holds nothing.
	for _, g := range []*dlock.Group{nil, {}} {
		if g.Leases() != nil || !errors.Is(g.Err(), dlock.ErrNotHeld) || !errors.Is(g.Unlock(t.Context()), dlock.ErrNotHeld) {
			t.Errorf("%#v reports a hold", g)
		}
		select {
		case <-g.Done():
		default:
			t.Errorf("%#v: Done is not closed", g)
		}
	}
}

// funcLocker is a caller's Locker made of one function.
type funcLocker func(context.Context) (*dlock.Lease, error)

func (funcLocker) Name() string                                        { return "lockall-func" }
func (f funcLocker) Lock(ctx context.Context) (*dlock.Lease, error)    { return f(ctx) }
func (f funcLocker) TryLock(ctx context.Context) (*dlock.Lease, error) { return f(ctx) }
