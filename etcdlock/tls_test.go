package etcdlock_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// etcd over TLS with client-certificate authentication (--client-cert-auth):
// the core of the contract over etcds:// with the test CA and a client
// certificate; no certificate, a server certificate for another name
// (unless insecure_skip_verify=true) and a plaintext URL are each refused
// with an error that says why, in bounded time; key paths stay out of
// errors.
func TestTLS(t *testing.T) {
	c := testserver.NewTLS(t)
	srv := testserver.EtcdTLS(t, c, true)
	port := strings.Split(srv.Addr(), ":")[1]
	ca := "ca=" + url.QueryEscape(c.CAFile)
	cert := "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + url.QueryEscape(c.ClientKeyFile)
	good := "etcds://" + srv.Addr() + "/tls/?" + ca + cert
	t.Run("Core", func(t *testing.T) {
		drivertest.RunCore(t, drivertest.URLOpener(good),
			drivertest.Caps{TTL: 2 * time.Second, Slack: time.Second})
	})
	t.Run("NoClientCertificate", func(t *testing.T) {
		drivertest.WantOpenError(t, "etcds://"+srv.Addr()+"?"+ca+"&dial_timeout=2s", "certificate", "cert= and key=")
	})
	t.Run("OtherName", func(t *testing.T) {
		other := "etcds://localhost:" + port + "?" + ca + cert + "&dial_timeout=2s"
		drivertest.WantOpenError(t, other, "certificate", "localhost")
		drivertest.CheckURL(t, other+"&insecure_skip_verify=true")
	})
	t.Run("Plaintext", func(t *testing.T) {
		drivertest.WantOpenError(t, "etcd://"+srv.Addr()+"?dial_timeout=2s", "etcds://")
	})
	t.Run("TLSParamsNeedTLS", func(t *testing.T) { drivertest.WantInvalidURL(t, "etcd://"+srv.Addr()+"?"+ca, "", "etcds://") })
	t.Run("KeyPathHidden", func(t *testing.T) {
		drivertest.WantInvalidURL(t, "etcds://"+srv.Addr()+"?"+ca+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key=/nonexistent/s3cret/k.pem", "s3cret", "key")
	})
}
