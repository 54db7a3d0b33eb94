package mysqllock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// With every max_held connection holding a lock, TryLock of a free name
// said "held by another owner"; it now says what is wrong, and still
// matches ErrNotAcquired.
func TestMaxHeldFullSaysSo(t *testing.T) {
	c := drivertest.MustOpen(t, testserver.MariaDBURL(t, testserver.MariaDB(t), "dlock")+"?mode=session&max_held=1")
	l, err := c.Mutex("maxheld-a").TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	_, err = c.Mutex("maxheld-b").TryLock(t.Context())
	if !errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "max_held") || strings.Contains(err.Error(), "another owner") {
		t.Errorf("TryLock with max_held used up: %v; want ErrNotAcquired naming max_held", err)
	}
}
