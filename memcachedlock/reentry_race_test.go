package memcachedlock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestNestedLockRacingUnlock: a nested Lock racing its hold's last Unlock
// (fixed owner) gets a lease or nothing, never an error, and once every
// lease is unlocked another client gets the lock at once. The Unlock may
// delete the item between the re-entry's gets and its cas, which
// gomemcache reports as a cache miss: the re-entry must look again, not
// fail with it (an adversary pass saw it fail in about one round in ten).
func TestNestedLockRacingUnlock(t *testing.T) {
	url := "memcached://" + testserver.Memcached(t).Addr()
	drivertest.NestedLockRacingUnlock(t, drivertest.MustOpen(t, url), drivertest.MustOpen(t, url), 200, 400*time.Microsecond)
}
