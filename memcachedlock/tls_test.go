package memcachedlock_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness):
// memcached over TLS (-Z, Debian's memcached is built with it), with
// tls=true and the test CA; a plaintext URL fails at once with a hint.
func (h *harness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.MemcachedTLS(t, c)
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	good := "memcached://" + srv.Addr() + "?tls=true&timeout=2s" + ca
	other := "memcached://" + testserver.Localhost(srv.Addr()) + "?tls=true&timeout=2s" + ca
	caps := h.Caps()
	// TTL 3s, not the plain suite's 2s: a lease is valid for TTL-1s
	// (memcached's clock), and a renewal that dials a new TLS connection on
	// a loaded machine needs more than 2s leaves.
	caps.TTL = 3 * time.Second
	return drivertest.TLSCase{URL: good, Caps: caps,
		Working:   map[string]string{"ClientCertificate": good + "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + url.QueryEscape(c.ClientKeyFile)},
		OtherName: other, Insecure: []string{other + "&insecure_skip_verify=true"},
		Plaintext: "memcached://" + srv.Addr(), PlaintextSays: []string{"tls=true"},
		NeedTLS: "memcached://" + srv.Addr() + "?" + ca[1:], NeedTLSSays: "tls=true",
		BadKey: good + "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + drivertest.MissingKey, BadKeySays: []string{"key"},
	}
}
