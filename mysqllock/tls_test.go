package mysqllock_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// MariaDB over TLS (require_secure_transport=ON): the core of the contract
// with tls=true and the test CA, a client certificate, a certificate for
// another name refused unless tls=skip-verify or insecure_skip_verify=true,
// a plaintext URL refused by the server, key paths kept out of errors.
func TestTLS(t *testing.T) {
	c := testserver.NewTLS(t)
	srv := testserver.MariaDBTLS(t, c)
	good := testserver.MariaDBTLSURL(t, srv, c, "dlock")
	port := strings.Split(srv.Addr(), ":")[1]
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	t.Run("Core", func(t *testing.T) {
		drivertest.RunCore(t, drivertest.URLOpener(good),
			drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 200 * time.Millisecond, StoreReentrant: true})
	})
	t.Run("SessionMode", func(t *testing.T) { drivertest.CheckURL(t, good+"&mode=session") })
	t.Run("ClientCertificate", func(t *testing.T) {
		drivertest.CheckURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key="+url.QueryEscape(c.ClientKeyFile))
	})
	t.Run("OtherName", func(t *testing.T) {
		other := "mysql://root@localhost:" + port + "/dlock?tls=true" + ca
		drivertest.WantOpenError(t, other, "certificate", "localhost")
		drivertest.CheckURL(t, other+"&insecure_skip_verify=true")
		drivertest.CheckURL(t, "mysql://root@localhost:"+port+"/dlock?tls=skip-verify")
	})
	t.Run("Plaintext", func(t *testing.T) {
		drivertest.WantOpenError(t, "mysql://root@"+srv.Addr()+"/dlock", "require_secure_transport", "tls=true")
	})
	t.Run("TLSParamsNeedTLS", func(t *testing.T) {
		drivertest.WantInvalidURL(t, "mysql://root@"+srv.Addr()+"/dlock?"+ca[1:], "", "tls=true")
	})
	t.Run("KeyPathHidden", func(t *testing.T) {
		drivertest.WantInvalidURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key=/nonexistent/s3cret/k.pem", "s3cret", "key")
	})
}
