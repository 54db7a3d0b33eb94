package etcdlock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

func TestList(t *testing.T) {
	h := &harness{endpoints: []string{testserver.Etcd(t).Addr()}}
	drivertest.RunList(t, h.NewClient, drivertest.ListCaps{Labels: true, TTL: true, Waiters: true})
}
