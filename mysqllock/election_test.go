package mysqllock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// TestElectionAndLockAll runs the election and LockAll suites in every mode.
func TestElectionAndLockAll(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeTable, mysqllock.ModeRow, mysqllock.ModeSession} {
		nh := func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
			return &harness{addr: srv.Addr(), mode: mode}, nil
		}
		t.Run(string(mode)+"/Election", func(t *testing.T) { drivertest.RunElection(t, nh) })
		t.Run(string(mode)+"/LockAll", func(t *testing.T) { drivertest.RunLockAll(t, nh) })
	}
}
