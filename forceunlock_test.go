package dlock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dlock/dlock/driver"
)

// ForceUnlock of each kind checks its input as every call does, and says
// ErrUnsupported where the backend lacks the kind or cannot drop its holds,
// naming which.
func TestForceUnlockInput(t *testing.T) {
	ctx := context.Background()
	var nilCtx context.Context
	d := newFake() // a driver with neither the kinds nor ForceReleaser
	c := New(d, "fake")
	defer c.Close()
	d2 := newFake()
	d2.caps.Kinds = []driver.Kind{driver.Shared, driver.Write, driver.Permit} // the kinds, without KindForceReleaser
	c2 := New(d2, "fake")
	for _, tc := range []struct {
		what string
		err  error
		want error
		says string
	}{
		{"RWMutex nil ctx", c.RWMutex("a").ForceUnlock(nilCtx), ErrNilContext, ""},
		{"Semaphore bad name", c.Semaphore("", 1).ForceUnlock(ctx), ErrInvalidName, ""},
		{"Mutex without ForceReleaser", c.ForceUnlock(ctx, "a"), ErrUnsupported, ""},
		{"RWMutex without the kind", c.RWMutex("a").ForceUnlock(ctx), ErrUnsupported, "no read-write locks"},
		{"Semaphore without the kind", c.Semaphore("a", 1).ForceUnlock(ctx), ErrUnsupported, "no semaphores"},
		{"RWMutex without KindForceReleaser", c2.RWMutex("a").ForceUnlock(ctx), ErrUnsupported, "cannot force-release its read-write locks"},
		{"Semaphore without KindForceReleaser", c2.Semaphore("a", 1).ForceUnlock(ctx), ErrUnsupported, "cannot force-release its semaphores"},
	} {
		var de *Error
		if !errors.Is(tc.err, tc.want) || !errors.As(tc.err, &de) || de.Name != "a" && tc.want != ErrInvalidName {
			t.Errorf("%s = %v; want a *dlock.Error of lock \"a\" wrapping %v", tc.what, tc.err, tc.want)
		} else if tc.says != "" && !strings.Contains(tc.err.Error(), tc.says) {
			t.Errorf("%s = %v; want it to say %q", tc.what, tc.err, tc.says)
		}
	}
	_ = c2.Close()
	if err := c2.RWMutex("a").ForceUnlock(ctx); !errors.Is(err, ErrUnsupported) {
		t.Errorf("after Close, without KindForceReleaser: %v; want ErrUnsupported", err)
	}
}

// A closed client's ForceUnlock of any kind returns ErrClosed, not the
// driver's error after its Close.
func TestForceUnlockClosed(t *testing.T) {
	d := &kindForceFake{fakeDriver: newFake()}
	d.caps.Kinds = []driver.Kind{driver.Shared, driver.Write, driver.Permit}
	c := New(d, "fake")
	if err := c.RWMutex("a").ForceUnlock(t.Context()); err != nil || d.forced != "a/rw" {
		t.Fatalf("RWMutex.ForceUnlock = %v, forced %q; want nil and the driver called for the read-write lock", err, d.forced)
	}
	if err := c.Semaphore("b", 3).ForceUnlock(t.Context()); err != nil || d.forced != "b/sem" || len(d.tokens) != 0 {
		t.Fatalf("Semaphore.ForceUnlock = %v, forced %q, tokens %v", err, d.forced, d.tokens)
	}
	if err := c.RWMutex("c").ForceUnlock(t.Context(), 7, 9); err != nil || d.forced != "c/rw" || !slices.Equal(d.tokens, []uint64{7, 9}) {
		t.Fatalf("RWMutex.ForceUnlock(7, 9) = %v, forced %q, tokens %v; want the tokens passed on", err, d.forced, d.tokens)
	}
	_ = c.Close()
	d.forced = ""
	for _, err := range []error{c.RWMutex("a").ForceUnlock(t.Context()), c.Semaphore("a", 1).ForceUnlock(t.Context())} {
		if !errors.Is(err, ErrClosed) || d.forced != "" {
			t.Errorf("ForceUnlock after Close = %v (driver called: %q); want ErrClosed", err, d.forced)
		}
	}
}

type kindForceFake struct {
	*fakeDriver
	forced string   // the last lock it dropped, "name/rw" or "name/sem"
	tokens []uint64 // and the tokens it was given
}

func (d *kindForceFake) ForceReleaseKind(_ context.Context, name string, kind driver.Kind, tokens []uint64) error {
	d.tokens = tokens
	switch kind {
	case driver.Shared:
		d.forced = name + "/rw"
	case driver.Permit:
		d.forced = name + "/sem"
	default:
		d.forced = name + "/?"
	}
	return nil
}
