package zklock_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness):
// ZooKeeper's secure client port only (Netty), with tls=true and the test
// CA; a certificate for another name is refused at once, with credentials
// too, and a plaintext URL fails at once, saying the server speaks TLS.
func (h *harness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.ZooKeeperTLS(t, c)
	local := testserver.Localhost(srv.Addr())
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	good := "zk://" + srv.Addr() + "/tls?tls=true&session_timeout=" + sessionTimeout.String() + ca
	other := "zk://" + local + "/tls?tls=true" + ca
	return drivertest.TLSCase{URL: good, Caps: h.Caps(),
		Working:   map[string]string{"ClientCertificate": good + "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + url.QueryEscape(c.ClientKeyFile)},
		OtherName: other, Insecure: []string{other + "&insecure_skip_verify=true"},
		Plaintext: "zk://" + srv.Addr(), PlaintextSays: []string{"TLS only", "tls=true"},
		NeedTLS: "zk://" + srv.Addr() + "?" + ca[1:], NeedTLSSays: "tls=true",
		BadKey: good + "&cert=" + url.QueryEscape(c.ClientCertFile) + "&key=" + drivertest.MissingKey, BadKeySays: []string{"key"},
		More: map[string]func(t *testing.T){
			// go-zookeeper's AddAuth, run first, said only "could not
			// connect to a server".
			"OtherNameWithCredentials": func(t *testing.T) {
				drivertest.WantOpenError(t, "zk://dlock:pw@"+local+"/tls?tls=true"+ca, "certificate", "localhost")
			},
			"PlaintextAtOnce": func(t *testing.T) {
				start := time.Now()
				drivertest.WantOpenError(t, "zk://"+srv.Addr(), "TLS only")
				if took := time.Since(start); took > 8*time.Second { // the session wait alone is 10s
					t.Errorf("plaintext URL took %v to fail: not at once", took)
				}
			},
		},
	}
}
