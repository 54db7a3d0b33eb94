package natslock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Elections are dlock's portable ones, on a mutex woken by the KV watch.
func TestElection(t *testing.T) {
	srv := testserver.NATSProcess(t)
	drivertest.RunElection(t, newHarness("nats://"+srv.Addr()))
}

func TestLockAll(t *testing.T) {
	srv := testserver.NATSProcess(t)
	drivertest.RunLockAll(t, newHarness("nats://"+srv.Addr()))
}

func TestList(t *testing.T) {
	srv := testserver.NATSProcess(t)
	h := &harness{url: "nats://" + srv.Addr(), bucket: "dlocktest"}
	drivertest.RunList(t, h.NewClient, drivertest.ListCaps{Labels: true, TTL: true})
}
