package mysqllock_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A MaxInt64 permit count returned the driver's raw out-of-range error; it
// is ErrInvalidConfig saying the limit.
func TestHugePermitCountSaysSo(t *testing.T) {
	c := drivertest.MustOpen(t, testserver.MariaDBURL(t, testserver.MariaDB(t), "dlock"))
	_, err := c.Semaphore("huge-permits", math.MaxInt64).TryAcquire(t.Context())
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "2147483647") {
		t.Errorf("TryAcquire with MaxInt64 permits: %v; want ErrInvalidConfig naming the limit", err)
	}
}
