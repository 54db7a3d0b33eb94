package pglock

import (
	"testing"

	"github.com/dlock/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgx reads the connection string dlock gives it as dlock read the URL:
// with no path, "postgres://h?a=b@127.0.0.1:1?sslrootcert=F" had been
// "user h?a=b at 127.0.0.1" to pgx, which then read sslrootcert=F that
// dlock's checks had not seen (a FIFO there hung Open). pgx now reads the
// same host as dlock, or refuses the string.
func TestConnStringAgreesWithDlock(t *testing.T) {
	for _, raw := range []string{
		"postgres://h?a=b@127.0.0.1:1?sslrootcert=/nonexistent",
		"postgres://h:5432?x=y@127.0.0.1:1",
		"postgres://u@h:5432/db?application_name=a@b",
	} {
		u, err := driver.ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		pq, q, err := pgxQuery(u.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgconn.ParseConfig(connString(u, q))
		if err != nil {
			continue // refused: pgx reads nothing
		}
		if cfg.Host != u.Hostname() {
			t.Errorf("%s: pgx's host %q, dlock's %q", raw, cfg.Host, u.Hostname())
		}
		if pq.Has("sslrootcert") {
			t.Errorf("%s: dlock sees sslrootcert in %v", raw, pq)
		}
	}
}
