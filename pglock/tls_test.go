package pglock_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// PostgreSQL over TLS (ssl=on, pg_hba.conf hostssl only): the core of the
// contract with sslmode=verify-full and the test CA, in table and session
// modes; a certificate for another name refused by verify-full and accepted
// by sslmode=require without a CA (libpq's explicit "encrypt, don't
// verify"); sslmode=disable refused by the server; key paths kept out of
// errors.
func TestTLS(t *testing.T) {
	c := testserver.NewTLS(t)
	srv := testserver.PostgresTLS(t, c)
	good := testserver.PostgresTLSURL(srv, c)
	port := strings.Split(srv.Addr(), ":")[1]
	ca := "&sslrootcert=" + url.QueryEscape(c.CAFile)
	t.Run("Core", func(t *testing.T) {
		drivertest.RunCore(t, drivertest.URLOpener(good),
			drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 150 * time.Millisecond, StoreReentrant: true})
	})
	t.Run("SessionMode", func(t *testing.T) { drivertest.CheckURL(t, good+"&mode=session") })
	t.Run("ClientCertificate", func(t *testing.T) {
		drivertest.CheckURL(t, good+"&sslcert="+url.QueryEscape(c.ClientCertFile)+"&sslkey="+url.QueryEscape(c.ClientKeyFile))
	})
	t.Run("OtherName", func(t *testing.T) {
		drivertest.WantOpenError(t, "postgres://postgres@localhost:"+port+"/postgres?sslmode=verify-full"+ca, "certificate", "localhost")
		drivertest.CheckURL(t, "postgres://postgres@localhost:"+port+"/postgres?sslmode=require")
	})
	t.Run("Plaintext", func(t *testing.T) {
		drivertest.WantOpenError(t, testserver.PostgresURL(srv), "no encryption")
	})
	t.Run("KeyPathHidden", func(t *testing.T) { // neither the key's path nor its password
		drivertest.WantInvalidURL(t, good+"&sslcert="+url.QueryEscape(c.ClientCertFile)+"&sslkey=/nonexistent/s3cret/k.pem&sslpassword=s3cretpw", "s3cret")
	})
}
