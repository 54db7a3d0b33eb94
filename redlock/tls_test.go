package redlock_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness): three
// TLS-only masters, with tls=true and the test CA; a plaintext URL fails at
// once, saying so.
func (h *harness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	var hosts, others []string
	for range 3 {
		s := testserver.RedisTLS(t, c)
		hosts = append(hosts, s.Addr())
		others = append(others, testserver.Localhost(s.Addr()))
	}
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	good := "redlock://" + strings.Join(hosts, ",") + "?tls=true" + ca
	other := "redlock://" + strings.Join(others, ",") + "?tls=true" + ca
	cert := "&cert=" + url.QueryEscape(c.ClientCertFile)
	// node_timeout as the harness's: the suite tests locking, not latency.
	return drivertest.TLSCase{URL: good + "&node_timeout=150ms", Caps: h.Caps(),
		Working:   map[string]string{"ClientCertificate": good + cert + "&key=" + url.QueryEscape(c.ClientKeyFile)},
		OtherName: other, Insecure: []string{other + "&insecure_skip_verify=true"},
		Plaintext: "redlock://" + strings.Join(hosts, ","), PlaintextSays: []string{"tls=true"},
		NeedTLS: "redlock://" + strings.Join(hosts, ",") + "?" + ca[1:], NeedTLSSays: "tls=true",
		BadKey: good + cert + "&key=" + drivertest.MissingKey, BadKeySays: []string{"key"},
	}
}
