package mysqllock_test

import (
	"net/url"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness):
// MariaDB with require_secure_transport=ON, with tls=true and the test CA,
// in table and session modes; a certificate for another name is refused
// unless tls=skip-verify or insecure_skip_verify=true, and a plaintext URL
// is refused by the server.
func (h tableHarness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.MariaDBTLS(t, c)
	good := testserver.MariaDBTLSURL(t, srv, c, "dlock")
	local := testserver.Localhost(srv.Addr())
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	other := "mysql://root@" + local + "/dlock?tls=true" + ca
	cert := "&cert=" + url.QueryEscape(c.ClientCertFile)
	return drivertest.TLSCase{URL: good, Caps: h.Caps(),
		Working: map[string]string{"SessionMode": good + "&mode=session",
			"ClientCertificate": good + cert + "&key=" + url.QueryEscape(c.ClientKeyFile)},
		OtherName: other, Insecure: []string{other + "&insecure_skip_verify=true", "mysql://root@" + local + "/dlock?tls=skip-verify"},
		Plaintext: "mysql://root@" + srv.Addr() + "/dlock", PlaintextSays: []string{"require_secure_transport", "tls=true"},
		NeedTLS: "mysql://root@" + srv.Addr() + "/dlock?" + ca[1:], NeedTLSSays: "tls=true",
		BadKey: good + cert + "&key=" + drivertest.MissingKey, BadKeySays: []string{"key"},
	}
}
