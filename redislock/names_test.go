package redislock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks (keys are the prefix and the name as
// given, byte for byte).
func TestDistinctNames(t *testing.T) {
	u := "redis://" + testserver.Redis(t).Addr()
	drivertest.DistinctNames(t, drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.NamePairs("distinct-", 3, 40))
}
