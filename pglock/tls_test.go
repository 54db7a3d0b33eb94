package pglock_test

import (
	"net/url"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness):
// PostgreSQL with ssl=on and pg_hba.conf hostssl only, with
// sslmode=verify-full and the test CA, in table and session modes; a
// certificate for another name is refused by verify-full and accepted by
// sslmode=require without a CA (libpq's explicit "encrypt, don't verify");
// sslmode=disable is refused by the server; neither a key's path nor its
// password shows in errors.
func (h tableHarness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.PostgresTLS(t, c)
	good := testserver.PostgresTLSURL(srv, c)
	local := testserver.Localhost(srv.Addr())
	cert := "&sslcert=" + url.QueryEscape(c.ClientCertFile)
	return drivertest.TLSCase{URL: good, Caps: h.Caps(),
		Working: map[string]string{"SessionMode": good + "&mode=session",
			"ClientCertificate": good + cert + "&sslkey=" + url.QueryEscape(c.ClientKeyFile)},
		OtherName: "postgres://postgres@" + local + "/postgres?sslmode=verify-full&sslrootcert=" + url.QueryEscape(c.CAFile),
		Insecure:  []string{"postgres://postgres@" + local + "/postgres?sslmode=require"},
		Plaintext: testserver.PostgresURL(srv), PlaintextSays: []string{"no encryption"},
		BadKey: good + cert + "&sslkey=" + drivertest.MissingKey + "&sslpassword=s3cretpw",
	}
}
