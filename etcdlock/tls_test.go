package etcdlock_test

import (
	"net/url"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness): etcd
// over TLS with client-certificate authentication (--client-cert-auth),
// over etcds:// with the test CA and a client certificate; no certificate
// is refused too, saying why, in bounded time.
func (h debianHarness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.EtcdTLS(t, c, true)
	ca := "ca=" + url.QueryEscape(c.CAFile)
	cert := "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + url.QueryEscape(c.ClientKeyFile)
	other := "etcds://" + testserver.Localhost(srv.Addr()) + "?" + ca + cert + "&dial_timeout=2s"
	return drivertest.TLSCase{URL: "etcds://" + srv.Addr() + "/tls/?" + ca + cert, Caps: h.Caps(),
		OtherName: other, Insecure: []string{other + "&insecure_skip_verify=true"},
		Plaintext: "etcd://" + srv.Addr() + "?dial_timeout=2s", PlaintextSays: []string{"etcds://"},
		NeedTLS: "etcd://" + srv.Addr() + "?" + ca, NeedTLSSays: "etcds://",
		BadKey: "etcds://" + srv.Addr() + "?" + ca + "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + drivertest.MissingKey, BadKeySays: []string{"key"},
		More: map[string]func(t *testing.T){"NoClientCertificate": func(t *testing.T) {
			drivertest.WantOpenError(t, "etcds://"+srv.Addr()+"?"+ca+"&dial_timeout=2s", "certificate", "cert= and key=")
		}},
	}
}
