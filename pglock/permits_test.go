package pglock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A MaxInt64 permit count returned the driver's raw out-of-range error.
func TestHugePermitCountSaysSo(t *testing.T) {
	drivertest.WantHugePermitsRefused(t, drivertest.MustOpen(t, testserver.PostgresURL(testserver.Postgres(t))), "2147483647")
}
