package mysqllock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// The driver's own DSN parameters (timeout=, readTimeout=, …) configure the
// driver, as the package doc says: they had been sent to the server as
// system variables ("SET timeout = 5s"), so a URL with one never opened.
func TestDSNParams(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := testserver.MariaDBURL(t, srv, "dlock_dsn")
	for _, q := range []string{
		"?timeout=5s&readTimeout=10s&writeTimeout=10s", "?mode=row&timeout=5s", "?sql_mode=%27ANSI_QUOTES%27",
		"?charset=utf8mb4,utf8", // the driver takes charset as written: an escaped comma failed
		"?loc=Europe/Paris",     // a '/' in a value: "default addr for network '/?loc=Europe' unknown"
	} {
		t.Run(q, func(t *testing.T) {
			ctx := context.Background()
			c, err := dlock.Open(ctx, base+q)
			if err != nil {
				t.Fatalf("Open(%s): %v", q, err)
			}
			defer c.Close()
			l, err := c.Mutex("dsn").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A negative timeout, an unparsable one, or a parameter given twice is
// ErrInvalidURL before any connection is made.
func TestBadDSNParams(t *testing.T) {
	for _, c := range []struct{ q, want string }{
		{"timeout=-1s", "timeout"},
		{"readTimeout=-5s", "readTimeout"},
		{"writeTimeout=-5s", "writeTimeout"},
		{"timeout=soon", "timeout"},
		{"timeout=5s&timeout=1s", "timeout"},
		{"mode=row&mode=table", "mode"},
		{"strict=true", "strict"}, // the driver panics on it
		{"maxAllowedPacket=-1", "maxAllowedPacket"},
		{"autocommit=0", "autocommit"}, // a grant's row lock stayed taken
	} {
		t.Run(c.q, func(t *testing.T) { drivertest.WantInvalidURL(t, "mysql://127.0.0.1:1/x?"+c.q, "", c.want) })
	}
}
