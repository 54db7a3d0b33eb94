package etcdlock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks: keys are the prefix and the name as
// given, byte for byte, and a lock's contenders are only the direct
// children of "<prefix><name>/", so the pairs of a name and a name under it
// ("a" and "a/b", "p" and "p/lock-0000000001") are two locks too.
func TestDistinctNames(t *testing.T) {
	u := "etcd://" + testserver.Etcd(t).Addr()
	drivertest.DistinctNames(t, drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.NamePairs("distinct-", 4, 40))
}
