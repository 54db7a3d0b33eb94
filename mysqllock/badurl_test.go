package mysqllock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
)

// TestBadSizesAreErrors: a held-connection count out of range is
// ErrInvalidURL, said before any connection is made (it sized a channel up
// front: a crash or out of memory).
func TestBadSizesAreErrors(t *testing.T) {
	for _, u := range []string{
		"mysql://127.0.0.1:1/x?max_held=9223372036854775807",
		"mysql://127.0.0.1:1/x?max_held=100000000",
		"mysql://127.0.0.1:1/x?max_held=0",
	} {
		t.Run(u, func(t *testing.T) { drivertest.WantInvalidURL(t, u, "", "max_held") })
	}
}
