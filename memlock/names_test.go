package memlock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	_ "github.com/dlock/dlock/memlock"
)

// Distinct names are distinct locks.
func TestDistinctNames(t *testing.T) {
	u := "mem://distinct-names"
	drivertest.DistinctNames(t, drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.NamePairs("distinct-", 7, 40))
}
