package zklock_test

import (
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/kindtest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
)

// kindsClient opens a client of the harness and returns its driver.
func kindsClient(t *testing.T, h *harness) (*dlock.Client, driver.Driver) {
	t.Helper()
	c, err := h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, zklock.Driver(c)
}

// kindsOpen is kindsClient on a new server's harness, for kindtest.
func kindsOpen(t *testing.T) kindtest.Open {
	srv := testserver.ZooKeeper(t)
	h := &harness{addr: srv.Addr()}
	return func(t *testing.T) (*dlock.Client, driver.Driver) { return kindsClient(t, h) }
}

func TestRWLockDriver(t *testing.T)    { kindtest.RWLock(t, kindsOpen(t)) }
func TestSemaphoreDriver(t *testing.T) { kindtest.Semaphore(t, kindsOpen(t)) }
func TestSemaphoreLaterHolderReleases(t *testing.T) {
	kindtest.SemaphoreLaterHolderReleases(t, kindsOpen(t))
}
func TestSemaphoreContention(t *testing.T) { kindtest.SemaphoreContention(t, kindsOpen(t)) }
