package memlock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock/drivertest"
)

func memHarness(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	return &harness{url: "mem://" + t.Name()}, nil
}

func TestElection(t *testing.T) { drivertest.RunElection(t, memHarness) }

func TestLockAll(t *testing.T) { drivertest.RunLockAll(t, memHarness) }
