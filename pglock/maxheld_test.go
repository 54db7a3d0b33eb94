package pglock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// With every max_held connection holding a lock, TryLock of a free name
// said "held by another owner"; it now says what is wrong.
func TestMaxHeldFullSaysSo(t *testing.T) {
	drivertest.WantMaxHeldFull(t, drivertest.MustOpen(t, testserver.PostgresURL(testserver.Postgres(t))+"&mode=session&max_held=1"))
}
