package zklock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// ZooKeeper over TLS, its secure client port only (Netty): the core of the
// contract with tls=true and the test CA; a certificate for another name
// refused at once unless insecure_skip_verify=true; a plaintext URL failing
// at once, saying the server speaks TLS; key paths kept out of errors.
func TestTLS(t *testing.T) {
	c := testserver.NewTLS(t)
	srv := testserver.ZooKeeperTLS(t, c)
	port := strings.Split(srv.Addr(), ":")[1]
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	good := "zk://" + srv.Addr() + "/tls?tls=true&session_timeout=" + sessionTimeout.String() + ca
	t.Run("Core", func(t *testing.T) {
		drivertest.RunCore(t, drivertest.URLOpener(good),
			drivertest.Caps{TTL: sessionTimeout, Slack: time.Second, QueueInStore: true, SessionBound: true})
	})
	t.Run("ClientCertificate", func(t *testing.T) {
		drivertest.CheckURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key="+url.QueryEscape(c.ClientKeyFile))
	})
	t.Run("OtherName", func(t *testing.T) {
		other := "zk://localhost:" + port + "/tls?tls=true" + ca
		err := drivertest.WantOpenError(t, other, "certificate", "localhost")
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("refused certificate reported as a timeout: %v", err)
		}
		drivertest.CheckURL(t, other+"&insecure_skip_verify=true")
		// With credentials too: go-zookeeper's AddAuth, run first, said only
		// "could not connect to a server".
		drivertest.WantOpenError(t, "zk://dlock:pw@localhost:"+port+"/tls?tls=true"+ca, "certificate", "localhost")
	})
	t.Run("Plaintext", func(t *testing.T) {
		start := time.Now()
		drivertest.WantOpenError(t, "zk://"+srv.Addr(), "TLS only", "tls=true")
		if time.Since(start) > 8*time.Second { // the session wait alone is 10s
			t.Errorf("plaintext URL took %v to fail: not at once", time.Since(start))
		}
	})
	t.Run("TLSParamsNeedTLS", func(t *testing.T) { drivertest.WantInvalidURL(t, "zk://"+srv.Addr()+"?"+ca[1:], "", "tls=true") })
	t.Run("KeyPathHidden", func(t *testing.T) {
		drivertest.WantInvalidURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key=/nonexistent/s3cret/k.pem", "s3cret", "key")
	})
}
