package redislock_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TLS is the conformance suite's TLS section (drivertest.TLSHarness): Redis
// over rediss:// with the test CA; a server the system's CAs do not know is
// refused, and a key that is no key is named without its path.
func (h singleHarness) TLS(t *testing.T) drivertest.TLSCase {
	c := testserver.NewTLS(t)
	srv := testserver.RedisTLS(t, c)
	ca := "?ca=" + url.QueryEscape(c.CAFile)
	good := "rediss://" + srv.Addr() + "/0" + ca
	other := "rediss://" + testserver.Localhost(srv.Addr()) + "/0" + ca
	cert := "&cert=" + url.QueryEscape(c.ClientCertFile)
	return drivertest.TLSCase{URL: good, Caps: h.Caps(),
		Working:   map[string]string{"ClientCertificate": good + cert + "&key=" + url.QueryEscape(c.ClientKeyFile)},
		OtherName: other, Insecure: []string{other + "&insecure_skip_verify=true"},
		Plaintext: "redis://" + srv.Addr() + "/0", PlaintextSays: []string{"TLS"},
		NeedTLS: "redis://" + srv.Addr() + "/0" + ca, NeedTLSSays: "rediss://",
		BadKey: good + cert + "&key=" + drivertest.MissingKey, BadKeySays: []string{"key"},
		More: map[string]func(t *testing.T){
			"UnknownCA": func(t *testing.T) { drivertest.WantOpenError(t, "rediss://"+srv.Addr()+"/0", "certificate") },
			"KeyFileNotAKey": func(t *testing.T) {
				bad := filepath.Join(t.TempDir(), "s3cret-key.pem")
				if err := os.WriteFile(bad, []byte("not a key"), 0o600); err != nil {
					t.Fatal(err)
				}
				drivertest.WantInvalidURL(t, good+cert+"&key="+url.QueryEscape(bad), "s3cret", "key")
			},
		},
	}
}

// Sentinel over TLS: the sentinel and the master both TLS-only; the
// sentinel reaches the master over TLS and so does dlock.
func TestTLSSentinel(t *testing.T) {
	c := testserver.NewTLS(t)
	master := testserver.RedisTLS(t, c)
	sentinel := testserver.RedisSentinelTLS(t, c, master, "tlsmaster")
	ca := "?ca=" + url.QueryEscape(c.CAFile)
	drivertest.CheckURL(t, "rediss+sentinel://"+sentinel.Addr()+"/tlsmaster"+ca)
	drivertest.WantOpenError(t, "rediss+sentinel://"+testserver.Localhost(sentinel.Addr())+"/tlsmaster"+ca, "certificate", "localhost")
	drivertest.WantOpenError(t, "redis+sentinel://"+sentinel.Addr()+"/tlsmaster", "TLS")
}

// Cluster over TLS: every node, and the cluster bus, TLS-only; each node
// is verified against the address dlock dials, not the first seed's name.
func TestTLSCluster(t *testing.T) {
	c := testserver.NewTLS(t)
	nodes := testserver.RedisClusterTLS(t, c, 3)
	var seeds, others []string
	for _, n := range nodes {
		seeds = append(seeds, n.Addr())
		others = append(others, testserver.Localhost(n.Addr()))
	}
	ca := "?ca=" + url.QueryEscape(c.CAFile)
	u := "rediss+cluster://" + strings.Join(seeds, ",") + ca
	drivertest.CheckURL(t, u)
	a := drivertest.MustOpen(t, u)
	for i := range 20 { // names over many slots, so every node is used
		l, err := a.Mutex(fmt.Sprintf("tls/slot-%d", i)).Lock(t.Context())
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	drivertest.WantOpenError(t, "rediss+cluster://"+strings.Join(others, ",")+ca, "certificate", "localhost")
	drivertest.WantOpenError(t, "redis+cluster://"+strings.Join(seeds, ","), "TLS")
}
