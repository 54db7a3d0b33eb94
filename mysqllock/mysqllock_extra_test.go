package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

func open(t *testing.T, url string, mode mysqllock.Mode) *dlock.Client {
	t.Helper()
	return drivertest.MustOpen(t, url+"?mode="+string(mode))
}

// sqlBackend starts a server for the tests shared through sqltest.
func sqlBackend(t *testing.T) sqltest.Backend {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	return sqltest.Backend{Server: srv, URL: func(mode string) string { return url + "?mode=" + mode }}
}

// KILL of the holder's connection ends its row or session lock.
func TestKilledHolder(t *testing.T) {
	be := sqlBackend(t)
	admin, err := newDB(be.Server.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	sqltest.KilledHolder(t, be, func(ctx context.Context, t *testing.T, l *dlock.Lease) {
		var ml *mysqllock.Lease
		if !l.As(&ml) || ml.ConnID == 0 {
			t.Fatal("Lease.As(*mysqllock.Lease) gave no connection id")
		}
		if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL %d", ml.ConnID)); err != nil {
			t.Fatal(err)
		}
	})
}

// The mariadb client's GET_LOCK and dlock's session mode exclude each other,
// and long names are hashed as documented.
func TestGetLockInterop(t *testing.T) {
	client := testserver.LookBinary(t, "mariadb")
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	c := open(t, url, mysqllock.ModeSession)
	ctx := t.Context()
	host, port, _ := strings.Cut(srv.Addr(), ":")
	long := strings.Repeat("x", 80)
	for _, name := range []string{"orders/sku-42", long} {
		sqlName := mysqllock.LockName(name)
		if name == long && (len(sqlName) != 64 || !strings.HasPrefix(sqlName, "dlock:")) {
			t.Fatalf("LockName of an 80-char name = %q", sqlName)
		}
		cmd := exec.CommandContext(ctx, client, "-h", host, "-P", port, "-u", "root", "-N", "-e",
			fmt.Sprintf("SELECT GET_LOCK('%s', 10); SELECT SLEEP(2);", sqlName))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sqltest.ForeignHolderExcludes(t, c, name, cmd, func(t *testing.T) {
			out, err := exec.CommandContext(ctx, client, "-h", host, "-P", port, "-u", "root", "-N", "-e",
				fmt.Sprintf("SELECT GET_LOCK('%s', 0)", sqlName)).Output()
			if err != nil || strings.TrimSpace(string(out)) != "0" {
				t.Fatalf("client GET_LOCK while dlock holds: %q %v", out, err)
			}
		})
	}
}

// The row lock's query provably uses the primary key.
func TestRowQueryUsesPrimaryKey(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	_ = open(t, url, mysqllock.ModeRow)
	db, err := newDB(srv.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("INSERT IGNORE INTO dlock_rows (name) VALUES ('x'), ('y'), ('z')"); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(t.Context(), "EXPLAIN SELECT name FROM dlock_rows FORCE INDEX (PRIMARY) WHERE name = 'x' FOR UPDATE")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var plan []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		_ = rows.Scan(ptrs...)
		for i, c := range cols {
			plan = append(plan, c+"="+vals[i].String)
		}
	}
	p := strings.Join(plan, " ")
	if !strings.Contains(p, "key=PRIMARY") || !strings.Contains(p, "type=const") {
		t.Fatalf("row lock query plan does not use the primary key: %s", p)
	}
}

// A user without privileges gets an error that names them.
func TestMissingPrivileges(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	admin, err := newDB(srv.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{"CREATE USER 'weak'@'%'", "GRANT USAGE ON *.* TO 'weak'@'%'"} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	_, err = dlock.Open(t.Context(), "mysql://weak@"+srv.Addr()+"/dlock")
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Open as an unprivileged user: %v; want an error naming the privileges", err)
	}
}

// On a Galera cluster, where GET_LOCK is not replicated, Open refuses
// session mode with ErrUnsupported; table mode works.
func TestGaleraRefusesSessionMode(t *testing.T) {
	srv := testserver.MariaDBGalera(t)
	url := testserver.MariaDBURL(t, srv, "dlock")
	db, err := newDB(srv.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name, value string
	if err := db.QueryRowContext(t.Context(), "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &value); err != nil || value != "ON" {
		t.Fatalf("wsrep_on = %q, %v; want a Galera node", value, err)
	}
	c, err := dlock.Open(t.Context(), url+"?mode=session")
	if err == nil {
		c.Close()
		t.Fatal("session mode opened on Galera")
	}
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("session mode on Galera: %v; want ErrUnsupported", err)
	}
	tc := open(t, url, mysqllock.ModeTable)
	l, err := tc.Mutex("galera").TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// A dlock_locks made before holder labels and release ids (no label or
// released column) gets the columns at Open, keeps its rows, and holds
// labels from then on; Migrate can run again (sqltest.OldShapeMigrated).
func TestMigrateAddsLabel(t *testing.T) {
	srv := testserver.MariaDB(t)
	url := testserver.MariaDBURL(t, srv, "oldshape")
	ctx := t.Context()
	admin, err := newDB(srv.Addr(), "oldshape", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// The table as the previous version made it, with a live hold of its.
	for _, q := range []string{`CREATE TABLE dlock_locks (
  name       VARBINARY(1024) NOT NULL PRIMARY KEY,
  owner      VARBINARY(256) NOT NULL,
  holds      INT NOT NULL,
  token      BIGINT UNSIGNED NOT NULL,
  expires_at DATETIME(6) NOT NULL
) ENGINE=InnoDB`,
		"INSERT INTO dlock_locks VALUES ('old', 'old-owner', 1, 1, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	sqltest.OldShapeMigrated(t, open(t, url, mysqllock.ModeTable))
}

// See sqltest.StateRowWaitKept.
func TestTableStateRowWaitKept(t *testing.T) {
	be := sqlBackend(t)
	admin, err := newDB(be.Server.Addr(), "dlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	sqltest.StateRowWaitKept(t, be, func(ctx context.Context, t *testing.T, name string) func() {
		tx, err := admin.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM dlock_kinds WHERE name = ?`, name).Scan(&n); err != nil || n == 0 {
			t.Fatalf("the state rows: %v, %d rows", err, n)
		}
		if _, err := tx.ExecContext(ctx, `SELECT lim FROM dlock_kinds WHERE name = ? FOR UPDATE`, name); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := tx.Commit(); err != nil {
				t.Error(err)
			}
		}
	})
}
