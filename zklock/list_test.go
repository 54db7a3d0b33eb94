package zklock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

func TestList(t *testing.T) {
	h := &harness{addr: testserver.ZooKeeper(t).Addr()}
	drivertest.RunList(t, h.NewClient, drivertest.ListCaps{Labels: true, Waiters: true})
}
