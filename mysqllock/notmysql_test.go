package mysqllock_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/go-sql-driver/mysql"
)

// openErr opens u with a deadline far beyond the connect timeouts a user
// sets, so an Open that waits for it ends in context.DeadlineExceeded.
func openErr(t *testing.T, u string) error {
	t.Helper()
	return openWithin(t, u, 30*time.Second)
}

// openWithin opens u with a deadline of d and returns Open's error, failing
// t if Open succeeds.
func openWithin(t *testing.T, u string, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	c, err := dlock.Open(ctx, u)
	if err == nil {
		_ = c.Close()
		t.Fatalf("Open(%s) = nil error", u)
	}
	return err
}

// A mysql:// URL, with tls=true or not, naming another server's port waited
// out the whole connect timeout (go-sql-driver waits for the greeting a
// MySQL server sends first) and said "context deadline exceeded". Open now
// says the server is not MySQL, at once for a server that speaks first or
// hangs up, and after a second connection speaks to it for one that waits
// for the client (Redis, HTTP).
func TestNotMySQLServer(t *testing.T) {
	httpSrv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(httpSrv.Close)
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(tlsSrv.Close)
	garbage := testserver.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("INFO {\"server_id\":\"x\"}\r\n"))
		_, _ = c.Read(make([]byte, 1))
	})
	hangup := testserver.Serve(t, func(net.Conn) {})
	for _, tc := range []struct{ name, addr, says string }{
		{"Redis", testserver.Redis(t).Addr(), "answered with something other than a MySQL greeting"},
		{"HTTP", httpSrv.Listener.Addr().String(), "answered with something other than a MySQL greeting"},
		{"TLSPort", tlsSrv.Listener.Addr().String(), "hung up when spoken to"},
		{"Garbage", garbage, "answered with something other than a MySQL greeting"},
		{"HangUp", hangup, "hung up without a MySQL greeting"},
	} {
		for _, q := range []string{"?tls=true", ""} {
			t.Run(tc.name+q, func(t *testing.T) {
				u := "mysql://root:s3cret@" + tc.addr + "/dlock" + q
				err := openErr(t, u)
				if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), tc.addr) {
					t.Errorf("Open(%s): %v; want it to say %q, naming the address, before the deadline", u, err, tc.says)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("Open(%s): %v shows the password", u, err)
				}
			})
		}
	}
}

// A server that accepts and says nothing, even when spoken to, cannot be
// told from a MySQL server slow to greet (reverse DNS can hold its greeting
// for seconds): Open waits for it until the deadline, but says what it
// waited for.
func TestSilentServer(t *testing.T) {
	silent := testserver.Serve(t, func(c net.Conn) { _, _ = c.Read(make([]byte, 1<<16)); _, _ = c.Read(make([]byte, 1)) })
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	_, err := dlock.Open(ctx, "mysql://root@"+silent+"/dlock?tls=true")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no MySQL greeting from the server at "+silent) {
		t.Errorf("Open against a silent server: %v; want context.DeadlineExceeded saying no MySQL greeting came", err)
	}
}

// A MySQL server without TLS, asked for TLS, is told at once by its
// greeting: Open says the server does not support TLS.
func TestTLSServerWithoutTLS(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, q := range []string{"?tls=true", "?tls=skip-verify"} {
		err := openErr(t, "mysql://root@"+srv.Addr()+"/dlock"+q)
		if !errors.Is(err, mysql.ErrNoTLS) || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Open(%s) against MariaDB without TLS: %v; want mysql.ErrNoTLS", q, err)
		}
	}
}
