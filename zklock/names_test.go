package zklock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks, or refused: "/a" was the node of "a",
// and "p/_c_…-lock-0000000000" made Inspect("p") report a phantom holder
// (and TryLock of "p" fail) while it was held.
func TestDistinctNames(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	a, b := directClient(t, srv.Addr()), directClient(t, srv.Addr())
	drivertest.DistinctNames(t, a, b, drivertest.NamePairs("distinct-", 1, 40))

	held, err := a.Mutex("phantom/_c_0123-lock-0000000000").TryLock(t.Context())
	if err == nil {
		defer held.Unlock(t.Context())
	} else if !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatal(err)
	}
	info, err := a.Inspect(t.Context(), "phantom")
	if err != nil || info.Held {
		t.Errorf("Inspect(phantom) = %+v, %v; want not held", info, err)
	}
	if _, err := a.Mutex("/lead").TryLock(t.Context()); !errors.Is(err, dlock.ErrInvalidName) {
		t.Errorf(`TryLock("/lead") = %v; want ErrInvalidName`, err)
	}
}
