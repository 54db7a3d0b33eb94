package memcachedlock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks (a key is the prefix and the name's
// SHA-256).
func TestDistinctNames(t *testing.T) {
	u := "memcached://" + testserver.Memcached(t).Addr()
	drivertest.DistinctNames(t, drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.NamePairs("distinct-", 5, 40))
}
