package pglock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

func TestList(t *testing.T) {
	srv := testserver.Postgres(t)
	for _, mode := range []pglock.Mode{pglock.ModeTable, pglock.ModeRow, pglock.ModeSession} {
		t.Run(string(mode), func(t *testing.T) {
			h := &harness{url: testserver.PostgresURL(srv), mode: mode}
			drivertest.RunList(t, h.NewClient, drivertest.ListCaps{Labels: mode == pglock.ModeTable, TTL: mode == pglock.ModeTable,
				Waiters: mode != pglock.ModeTable})
		})
	}
}
