package pglock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
)

// A TryLock in row mode does not wait for a transaction that has deleted
// or updated the lock's row and not ended: it waited in its insert of the
// row until its ctx ended (finding of an adversary pass).
func TestRowTryLockBesideRowChange(t *testing.T) {
	srv := testserver.Postgres(t)
	a := drivertest.MustOpen(t, testserver.PostgresURL(srv)+"&mode=row")
	for _, change := range []string{"DELETE FROM dlock_rows WHERE name = $1", "UPDATE dlock_rows SET name = name WHERE name = $1"} {
		name := strings.Fields(change)[0]
		heldOnce(t, a, name) // the name's row
		raw := connect(t, testserver.PostgresURL(srv))
		if _, err := raw.Exec(t.Context(), "BEGIN"); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(t.Context(), change, name); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := a.Mutex(name).TryLock(ctx)
		cancel()
		if !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("TryLock beside an open %s = %v; want ErrNotAcquired at once", strings.Fields(change)[0], err)
		}
		_ = raw.Close(t.Context())
	}
}

// A TryLock in row or session mode does not wait for an outsider that holds
// dlock's own tables: a transaction that has inserted the same new name, or
// renamed another row to it, that has locked either table, or the name's
// token row. Each waited until the TryLock's ctx ended, or beyond it
// (findings of an adversary pass). Where the lock's row is taken, the
// TryLock is refused; where its token is, it fails with the store's error.
// Either way it takes nothing: once the outsider is gone, the lock is free.
func TestTryLockBesideOutsiders(t *testing.T) {
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv)
	cases := []struct {
		mode, name string
		held       bool   // the name has been locked before (its rows exist)
		stmt       string // the outsider's, in an open transaction ($1: the name)
		refused    bool   // ErrNotAcquired; else another error
	}{
		{"row", "insert", false, "INSERT INTO dlock_rows (name) VALUES ($1)", true},
		{"row", "rename", false, "UPDATE dlock_rows SET name = $1 WHERE name = 'rename-from'", true},
		{"row", "rows-table", true, "LOCK TABLE dlock_rows", true},
		{"row", "token-row", true, "SELECT 1 FROM dlock_tokens WHERE name = $1 FOR UPDATE", false},
		{"row", "token-update", true, "UPDATE dlock_tokens SET token = token WHERE name = $1", false},
		{"row", "tokens-table", true, "LOCK TABLE dlock_tokens", false},
		{"session", "s-token-row", true, "SELECT 1 FROM dlock_tokens WHERE name = $1 FOR UPDATE", false},
		{"session", "s-tokens-table", true, "LOCK TABLE dlock_tokens", false},
		{"session", "rw-kinds-table", false, "LOCK TABLE dlock_kinds", false}, // a read-write lock's token
	}
	try := func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error) {
		if strings.HasPrefix(name, "rw-") {
			return c.RWMutex(name).TryRLock(ctx)
		}
		return c.Mutex(name).TryLock(ctx)
	}
	clients := map[string]*dlock.Client{
		"row":     drivertest.MustOpen(t, url+"&mode=row"),
		"session": drivertest.MustOpen(t, url+"&mode=session"),
	}
	heldOnce(t, clients["row"], "rename-from")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clients[tc.mode]
			if tc.held {
				heldOnce(t, c, tc.name)
			}
			raw := connect(t, url)
			if _, err := raw.Exec(t.Context(), "BEGIN"); err != nil {
				t.Fatal(err)
			}
			args := []any{tc.name}
			if !strings.Contains(tc.stmt, "$1") {
				args = nil
			}
			if _, err := raw.Exec(t.Context(), tc.stmt, args...); err != nil {
				t.Fatal(err)
			}
			sqltest.TryBeside(t, tc.stmt, tc.refused, func(ctx context.Context) (*dlock.Lease, error) { return try(ctx, c, tc.name) }, func() error {
				_, err := raw.Exec(t.Context(), "ROLLBACK")
				return err
			})
		})
	}
}
