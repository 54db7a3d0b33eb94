package mysqllock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

func TestList(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, mode := range []mysqllock.Mode{mysqllock.ModeTable, mysqllock.ModeRow, mysqllock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			h := &harness{addr: srv.Addr(), mode: mode}
			drivertest.RunList(t, h.NewClient, drivertest.ListCaps{Labels: mode == mysqllock.ModeTable, TTL: mode == mysqllock.ModeTable})
		})
	}
}
