package dlock_test

import (
	"errors"
	"testing"

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
			if !errors.Is(err, dlock.ErrInvalidName) {
				t.Errorf("LockAll(%v) = %v, %v; want ErrInvalidName", set, g, err)
			}
		}
	}
	// Nothing was left held by the refused calls.
	l, err := good.TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock after refused LockAll: %v", err)
	}
	_ = l.Unlock(t.Context())
}
