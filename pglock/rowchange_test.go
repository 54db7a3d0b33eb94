package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A TryLock in row mode does not wait for a transaction that has deleted
// or updated the lock's row and not ended: it waited in its insert of the
// row until its ctx ended (finding of an adversary pass).
func TestRowTryLockBesideRowChange(t *testing.T) {
	srv := testserver.Postgres(t)
	a := drivertest.MustOpen(t, testserver.PostgresURL(srv)+"&mode=row")
	for _, change := range []string{"DELETE FROM dlock_rows WHERE name = $1", "UPDATE dlock_rows SET name = name WHERE name = $1"} {
		name := strings.Fields(change)[0]
		heldOnce(t, a, name) // the name's row
		raw := connect(t, testserver.PostgresURL(srv))
		if _, err := raw.Exec(t.Context(), "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(t.Context(), change, name); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := a.Mutex(name).TryLock(ctx)
		cancel()
		if !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("TryLock beside an open %s = %v; want ErrNotAcquired at once", strings.Fields(change)[0], err)
		}
		_ = raw.Close(t.Context())
	}
}
