package pglock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// TestElectionAndLockAll runs the election and LockAll suites in every mode.
func TestElectionAndLockAll(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, mode := range []pglock.Mode{pglock.ModeTable, pglock.ModeRow, pglock.ModeSession} {
		nh := func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
			return &harness{url: testserver.PostgresURL(srv), mode: mode}, nil
		}
		t.Run(string(mode)+"/Election", func(t *testing.T) { drivertest.RunElection(t, nh) })
		t.Run(string(mode)+"/LockAll", func(t *testing.T) { drivertest.RunLockAll(t, nh) })
	}
}
