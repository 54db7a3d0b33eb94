package memcachedlock_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Memcached over TLS (-Z, Debian's memcached is built with it): the core of
// the contract with tls=true and the test CA, a client certificate, a
// certificate for another name refused unless insecure_skip_verify=true, a
// plaintext URL failing at once with a hint, key paths kept out of errors.
func TestTLS(t *testing.T) {
	c := testserver.NewTLS(t)
	srv := testserver.MemcachedTLS(t, c)
	port := strings.Split(srv.Addr(), ":")[1]
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	good := "memcached://" + srv.Addr() + "?tls=true&timeout=2s" + ca
	t.Run("Core", func(t *testing.T) {
		drivertest.RunCore(t, drivertest.URLOpener(good),
			// TTL 3s, not the plain suite's 2s: a lease is valid for TTL-1s
			// (memcached's clock), and a renewal that dials a new TLS
			// connection on a loaded machine needs more than 2s leaves.
			drivertest.Caps{TTL: 3 * time.Second, Slack: 1200 * time.Millisecond, EarlyExpiry: time.Second, StoreReentrant: true})
	})
	t.Run("ClientCertificate", func(t *testing.T) {
		drivertest.CheckURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key="+url.QueryEscape(c.ClientKeyFile))
	})
	t.Run("OtherName", func(t *testing.T) {
		other := "memcached://localhost:" + port + "?tls=true&timeout=2s" + ca
		drivertest.WantOpenError(t, other, "certificate", "localhost")
		drivertest.CheckURL(t, other+"&insecure_skip_verify=true")
	})
	t.Run("Plaintext", func(t *testing.T) {
		drivertest.WantOpenError(t, "memcached://"+srv.Addr(), "tls=true")
	})
	t.Run("TLSParamsNeedTLS", func(t *testing.T) { drivertest.WantInvalidURL(t, "memcached://"+srv.Addr()+"?"+ca[1:], "", "tls=true") })
	t.Run("KeyPathHidden", func(t *testing.T) {
		drivertest.WantInvalidURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key=/nonexistent/s3cret/k.pem", "s3cret", "key")
	})
}
