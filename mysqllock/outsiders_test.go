package mysqllock_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
)

// A TryLock in row or session mode does not wait for an outsider that holds
// dlock's own tables: a transaction that has locked the name's row or token
// row, or LOCK TABLES. Where the lock's row is in question, the TryLock is
// refused; where its token is, it fails with the store's error. Either way
// it takes nothing: once the outsider is gone, the lock is free.
func TestTryLockBesideOutsiders(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock_outsiders")
	cases := []struct {
		mode, name string
		stmt       string // the outsider's, in an open transaction (?: the name)
		refused    bool   // ErrNotAcquired; else another error
	}{
		{"row", "insert", "INSERT INTO dlock_rows (name) VALUES (?)", true},
		{"row", "rows-table", "LOCK TABLES dlock_rows WRITE", true},
		{"row", "token-row", "SELECT 1 FROM dlock_tokens WHERE name = ? FOR UPDATE", false},
		{"row", "tokens-table", "LOCK TABLES dlock_tokens WRITE", false},
		{"session", "s-token-row", "SELECT 1 FROM dlock_tokens WHERE name = ? FOR UPDATE", false},
		{"session", "s-tokens-table", "LOCK TABLES dlock_tokens WRITE", false},
	}
	clients := map[string]*dlock.Client{
		"row":     drivertest.MustOpen(t, url+"?mode=row"),
		"session": drivertest.MustOpen(t, url+"?mode=session"),
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/dlock_outsiders")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close() // after raw's Close: a failed case's outsider ends with it
			c := clients[tc.mode]
			if tc.name != "insert" {
				l, err := c.Mutex(tc.name).Lock(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				_ = l.Unlock(t.Context())
			}
			raw, err := db.Conn(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.ExecContext(t.Context(), "BEGIN"); err != nil {
				t.Fatal(err)
			}
			var args []any
			if strings.Contains(tc.stmt, "?") {
				args = []any{tc.name}
			}
			if _, err := raw.ExecContext(t.Context(), tc.stmt, args...); err != nil {
				t.Fatal(err)
			}
			sqltest.TryBeside(t, tc.stmt, tc.refused, c.Mutex(tc.name).TryLock, func() error {
				_, err := raw.ExecContext(t.Context(), "ROLLBACK")
				if err == nil {
					_, err = raw.ExecContext(t.Context(), "UNLOCK TABLES")
				}
				return err
			})
		})
	}
}
