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

// A URL that is not mem:// or mem://NAME is refused, not opened as a store:
// a user and password (a URL meant for another store?) had been ignored.
func TestBadURLs(t *testing.T) {
	for _, u := range []string{"mem://user:pw@x", "mem://user@x", "mem://x/path", "mem://x?a=1"} {
		t.Run(u, func(t *testing.T) { drivertest.WantInvalidURL(t, u, "pw", "mem://") })
	}
}
