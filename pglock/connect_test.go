package pglock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestConnectErrorCauseFirst: with sslmode=prefer (the default) against a
// server without TLS, a refused role is said first, not after pgx's
// "tls error: server refused TLS connection".
func TestConnectErrorCauseFirst(t *testing.T) {
	u := testserver.PostgresURL(testserver.Postgres(t))
	i, j := strings.Index(u, "://"), strings.LastIndex(u, "@")
	host := u[i+3:]
	if j > i {
		host = u[j+1:]
	}
	bad := strings.Replace(u[:i+3]+"no_such_role@"+host, "sslmode=disable", "sslmode=prefer", 1)
	_, err := dlock.Open(t.Context(), bad)
	if err == nil || !strings.Contains(err.Error(), `pglock: connect: server error: FATAL: role "no_such_role" does not exist`) ||
		strings.Contains(err.Error(), "tls error") {
		t.Fatalf("Open as a missing role: %v; want the server's answer first, without pgx's TLS attempt", err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28000" {
		t.Errorf("the error does not wrap pgx's: %v", err)
	}
}
