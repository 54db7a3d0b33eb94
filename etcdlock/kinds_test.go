package etcdlock_test

import (
	"testing"

	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/kindtest"
	"github.com/dlock/dlock/internal/testserver"
)

// kindsOpen opens clients of a new server, with their drivers, for
// kindtest.
func kindsOpen(t *testing.T) kindtest.Open {
	srv := testserver.Etcd(t)
	return kindtest.Opener(&harness{endpoints: []string{"http://" + srv.Addr()}}, etcdlock.DriverOf)
}

// The read-write lock and semaphore tests of internal/kindtest, on etcd.

func TestRWLockDriver(t *testing.T)    { kindtest.RWLock(t, kindsOpen(t)) }
func TestSemaphoreDriver(t *testing.T) { kindtest.Semaphore(t, kindsOpen(t)) }
func TestSemaphoreLaterHolderReleases(t *testing.T) {
	kindtest.SemaphoreLaterHolderReleases(t, kindsOpen(t))
}
func TestSemaphoreContention(t *testing.T) { kindtest.SemaphoreContention(t, kindsOpen(t)) }
