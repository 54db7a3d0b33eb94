package zklock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// BenchmarkLockUnlock is uncontended Lock+Unlock on a ready parent.
func BenchmarkLockUnlock(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	h := &harness{addr: srv.Addr()}
	c, err := h.NewClient(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	drivertest.LockUnlock(b, c, "bench/u")
}
