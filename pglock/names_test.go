package pglock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Distinct names are distinct locks in every mode (session mode's advisory
// lock key is a 64-bit hash of the name: a collision is possible in
// principle, at odds of about n²/2⁶⁵ for n names in use).
func TestDistinctNames(t *testing.T) {
	base := testserver.PostgresURL(testserver.Postgres(t))
	for _, mode := range []string{"table", "row", "session"} {
		t.Run(mode, func(t *testing.T) {
			u := base + "&mode=" + mode
			drivertest.DistinctNames(t, drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.NamePairs("distinct-", 6, 40))
		})
	}
}
