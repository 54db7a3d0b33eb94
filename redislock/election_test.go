package redislock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

func TestElection(t *testing.T) {
	srv := testserver.Redis(t)
	drivertest.RunElection(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return newSingleHarness(t, srv), nil
	})
}

func TestLockAll(t *testing.T) {
	srv := testserver.Redis(t)
	drivertest.RunLockAll(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return newSingleHarness(t, srv), nil
	})
}
