package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// Expiry did not hold across session time zones: it was judged by NOW(6),
// which follows each session's time_zone, so a client whose sessions ran
// at -05:00 wrote expiries five hours early as others read them, and one
// at +05:00 read every live lock as expired: two holders at once. Expiry
// is now judged by UTC_TIMESTAMP(6), the same for every session.
func TestSessionTimeZonesAgree(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := testserver.MariaDBURL(t, srv, "dlock_tz")
	ctx := context.Background()
	open := func(q string) *dlock.Client {
		c, err := dlock.Open(ctx, base+q)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for _, mode := range []string{"table", "row"} {
		west := open("?mode=" + mode + "&time_zone=%27-05:00%27")
		east := open("?mode=" + mode + "&time_zone=%27%2B05:00%27")
		plain := open("?mode=" + mode)
		for i, pair := range [][2]*dlock.Client{{west, plain}, {plain, east}, {west, east}} {
			name := mode + "/tz-" + string(rune('a'+i))
			l, err := pair[0].Mutex(name, dlock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if l2, err := pair[1].Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Errorf("%s: a client in another time zone took the held lock: %v (tokens %d and %d)", name, err, l.Token(), l2.Token())
				_ = l2.Unlock(ctx)
			}
			_ = l.Unlock(ctx)
		}
		if mode != "table" {
			continue // read-write locks are table mode's
		}
		// A read-write lock's holds expire by the same clock.
		rw, err := west.RWMutex(mode+"/tz-rw", dlock.WithTTL(time.Minute)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := east.RWMutex(mode + "/tz-rw").TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("%s: a reader in another time zone joined a held write lock: %v", mode, err)
			_ = r.Unlock(ctx)
		}
		_ = rw.Unlock(ctx)
	}
}

// Session settings that break the tables' guarantees are refused at Open,
// however a URL spells them: autocommit off (another client's TryLock then
// waited on the grant's row lock), and a fixed timestamp, which stopped
// UTC_TIMESTAMP in the past so that another client took a held lock.
func TestBadSessionSettingsRefused(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := testserver.MariaDBURL(t, srv, "dlock_session")
	for _, q := range []string{
		"?AUTOCOMMIT=0", "?@@session.autocommit=0", "?sql_mode=%27%27,autocommit=0",
		"?timestamp=1000000000", "?mode=row&timestamp=1000000000",
	} {
		c, err := dlock.Open(context.Background(), base+q)
		if err == nil {
			_ = c.Close()
		}
		if !errors.Is(err, dlock.ErrInvalidConfig) && !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%s) = %v; want it refused", q, err)
		}
	}
}

// A server whose sessions run in another time zone than UTC draws a
// warning at Open (older dlock judged expiry by NOW), and it reaches the
// logger the caller gave: the dlock client's on a URL, Options.Logger on
// an application's pool. It went to the ctx's logger only, which
// mysqllock.Open's callers had no way to set.
func TestTimeZoneWarningReachesLogger(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := testserver.MariaDBURL(t, srv, "dlock_tzw")
	ctx := context.Background()
	warned := func(t *testing.T, lines logLines) bool {
		t.Helper()
		for len(lines) > 0 {
			if strings.Contains(<-lines, "time zone is not UTC") {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		zone string
		want bool
	}{{"%27%2B05:00%27", true}, {"%27%2B00:00%27", false}} {
		lines := make(logLines, 64)
		c, err := dlock.Open(ctx, base+"?time_zone="+tc.zone, dlock.WithLogger(slog.New(slog.NewTextHandler(lines, nil))))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		if got := warned(t, lines); got != tc.want {
			t.Errorf("URL, time_zone=%s: warned %v, want %v", tc.zone, got, tc.want)
		}
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = "root", "tcp", srv.Addr(), "dlock_tzw", true
	cfg.Params = map[string]string{"time_zone": "'+05:00'"}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	lines := make(logLines, 64)
	c, err := mysqllock.Open(ctx, db, mysqllock.Options{CloseDB: true, Logger: slog.New(slog.NewTextHandler(lines, nil))})
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	_ = c.Close()
	if !warned(t, lines) {
		t.Error("mysqllock.Open on a +05:00 pool: no time zone warning in Options.Logger")
	}
}
