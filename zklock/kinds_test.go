package zklock_test

import (
	"testing"

	"github.com/dlock/dlock/internal/kindtest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
)

// kindsOpen opens clients of a new server, with their drivers, for
// kindtest.
func kindsOpen(t *testing.T) kindtest.Open {
	srv := testserver.ZooKeeper(t)
	return kindtest.Opener(&harness{addr: srv.Addr()}, zklock.Driver)
}

// The read-write lock and semaphore tests of internal/kindtest, on ZooKeeper.

func TestRWLockDriver(t *testing.T)    { kindtest.RWLock(t, kindsOpen(t)) }
func TestSemaphoreDriver(t *testing.T) { kindtest.Semaphore(t, kindsOpen(t)) }
func TestSemaphoreLaterHolderReleases(t *testing.T) {
	kindtest.SemaphoreLaterHolderReleases(t, kindsOpen(t))
}
func TestSemaphoreContention(t *testing.T) { kindtest.SemaphoreContention(t, kindsOpen(t)) }
