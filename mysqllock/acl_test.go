package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/sqltest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

func rootExec(t *testing.T, srv *testserver.Server, stmts ...string) {
	t.Helper()
	db, err := sql.Open("mysql", "root@tcp("+srv.Addr()+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// grantTenant runs the doc's block for tenant s (database s, users
// s_owner and s_worker), the owner migrating where the doc says to, and
// returns the worker's URL.
func grantTenant(t *testing.T, srv *testserver.Server, s string) string {
	t.Helper()
	r := strings.NewReplacer("dlock_owner", s+"_owner", "dlock_worker", s+"_worker", "DATABASE dlock;", "DATABASE "+s+";",
		"dlock.", s+".", "OWNER_PASSWORD", "owner-pw", "PASSWORD", "pw")
	sqltest.GrantTenant(t, "mysqllock.go", r, func(stmt string) { rootExec(t, srv, stmt) },
		fmt.Sprintf("mysql://%s_owner:owner-pw@%s/%s", s, srv.Addr(), s))
	return fmt.Sprintf("mysql://%s_worker:pw@%s/%s", s, srv.Addr(), s)
}

type aclHarness struct {
	harness
	user, db string
}

func (h *aclHarness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName, cfg.ParseTime = h.user, "pw", h.addr, h.db, true
	cfg.Timeout = time.Second
	cfg.Net = fmt.Sprintf("dlocktest%d", nets.Add(1))
	mysql.RegisterDialContext(cfg.Net, func(ctx context.Context, addr string) (net.Conn, error) { return cu.DialAddr(ctx, addr) })
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	c, err := mysqllock.Open(ctx, db, mysqllock.Options{Mode: h.mode, CloseDB: true})
	return h.Opened(c, cu, err, func() { _ = db.Close() })
}

// LeastPrivilege gives the suite clients of a worker with exactly the
// package doc's grant on tables an owner made, in h's mode
// (drivertest.ACLHarness).
func (h *harness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	tenant := "lp" + string(h.mode)
	grantTenant(t, h.srv, tenant)
	return &aclHarness{harness: harness{addr: h.addr, mode: h.mode}, user: tenant + "_worker", db: tenant}, nil
}

// TestMissingRight: a worker cannot make the tables (Open names the right
// and makes nothing), and one without the table grants fails Lock at once,
// naming them, instead of waiting out its ctx.
func TestMissingRight(t *testing.T) {
	srv := testserver.MariaDB(t)
	ctx := t.Context()
	rootExec(t, srv, "CREATE DATABASE bare", "CREATE USER 'bare'@'%' IDENTIFIED BY 'pw'", "GRANT SELECT ON bare.* TO 'bare'@'%'")
	url := "mysql://bare:pw@" + srv.Addr() + "/bare"
	_, err := dlock.Open(ctx, url)
	if err == nil || !strings.Contains(err.Error(), "CREATE command denied") || !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Fatalf("Open by a worker with no tables: %v; want CREATE named", err)
	}
	if _, err := dlock.Open(ctx, "mysql://bare:wrong@"+srv.Addr()+"/bare"); err == nil || !strings.Contains(err.Error(), "refused the user or password") {
		t.Fatalf("Open with a wrong password: %v; want the credentials named", err)
	}
	c, err := dlock.Open(ctx, "mysql://root@"+srv.Addr()+"/bare") // root makes the tables; bare may only read them
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	w := drivertest.MustOpen(t, url)
	drivertest.WantLockRefused(t, w, "acl/x", "INSERT, UPDATE command denied")
}

// TestTenantsApart: tenants a and b, each with the doc's database, owner
// and worker. b's worker cannot take, release, overwrite or force-release
// a's locks; force-releasing a's session lock needs CONNECTION ADMIN,
// which an operator has and workers do not.
func TestTenantsApart(t *testing.T) {
	srv := testserver.MariaDB(t)
	ctx := t.Context()
	aURL := grantTenant(t, srv, "a")
	bURL := grantTenant(t, srv, "b")
	a := drivertest.MustOpen(t, aURL)
	la, err := a.Mutex("x", dlock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	if _, err := dlock.Open(ctx, "mysql://b_worker:pw@"+srv.Addr()+"/a"); err == nil || !strings.Contains(err.Error(), "Access denied") {
		t.Errorf("Open of a's database by b's worker: %v; want access denied", err)
	}
	bdb, err := sql.Open("mysql", "b_worker:pw@tcp("+srv.Addr()+")/b")
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	for _, q := range []string{"UPDATE a.dlock_locks SET owner = 'b'", "UPDATE a.dlock_locks SET expires_at = '1970-01-02'",
		"INSERT INTO a.dlock_tokens (name, token) VALUES ('x', 1000)", "SELECT * FROM a.dlock_locks"} {
		if _, err := bdb.ExecContext(ctx, q); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Errorf("%s by b's worker: %v; want denied", q, err)
		}
	}
	drivertest.WantKept(t, a, la, "x", 5*time.Second)
	b := drivertest.MustOpen(t, bURL)
	lb, err := b.Mutex("x").TryLock(ctx) // b's own x, in b's database
	if err != nil {
		t.Fatalf("b's own lock: %v", err)
	}
	_ = lb.Unlock(ctx)

	// Session mode: a's worker holds y; GET_LOCK names are server-wide, so
	// b's worker finds the holder, but may not KILL its connection.
	sqltest.SessionForceUnlock(t, drivertest.MustOpen(t, aURL+"?mode=session"), drivertest.MustOpen(t, bURL+"?mode=session"),
		"CONNECTION ADMIN", func() *dlock.Client {
			rootExec(t, srv, "CREATE USER 'ops'@'%' IDENTIFIED BY 'pw'", "GRANT CONNECTION ADMIN ON *.* TO 'ops'@'%'",
				"GRANT SELECT ON a.* TO 'ops'@'%'")
			return drivertest.MustOpen(t, "mysql://ops:pw@"+srv.Addr()+"/a?mode=session")
		})
}
