package pglock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
)

// TestBadSizesAreErrors: pool and held-connection counts out of range are
// ErrInvalidURL, said before any connection is made (max_held sized a
// channel up front, and pool_max_conns overflowed int32 with it).
func TestBadSizesAreErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://127.0.0.1:1/x?max_held=9223372036854775807", "max_held"},
		{"postgres://127.0.0.1:1/x?max_held=-1", "max_held"},
		{"postgres://127.0.0.1:1/x?pool_max_conns=100000000", "pool_max_conns=100000000"},
		{"postgres://127.0.0.1:1/x?pool_min_conns=-1", "pool_min_conns=-1"},
		{"postgres://127.0.0.1:1/x?statement_cache_capacity=-1", "statement_cache_capacity=-1"},
		{"postgres://127.0.0.1:1/x?description_cache_capacity=1000000000", "description_cache_capacity=1000000000"},
	} {
		t.Run(tc.url, func(t *testing.T) { drivertest.WantInvalidURL(t, tc.url, "", tc.want) })
	}
}
