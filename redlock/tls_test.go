package redlock_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Redlock over TLS, three TLS-only masters: locks work with tls=true and
// the test CA; a certificate for another name is refused unless
// insecure_skip_verify=true; a plaintext URL fails at once, saying so.
func TestTLS(t *testing.T) {
	c := testserver.NewTLS(t)
	var hosts, others []string
	for range 3 {
		s := testserver.RedisTLS(t, c)
		hosts = append(hosts, s.Addr())
		others = append(others, "localhost:"+strings.Split(s.Addr(), ":")[1])
	}
	ca := "&ca=" + url.QueryEscape(c.CAFile)
	good := "redlock://" + strings.Join(hosts, ",") + "?tls=true" + ca
	drivertest.CheckURL(t, good)
	drivertest.CheckURL(t, good+"&cert="+url.QueryEscape(c.ClientCertFile)+"&key="+url.QueryEscape(c.ClientKeyFile))
	other := "redlock://" + strings.Join(others, ",") + "?tls=true" + ca
	drivertest.WantOpenError(t, other, "certificate", "localhost")
	drivertest.CheckURL(t, other+"&insecure_skip_verify=true")
	drivertest.WantOpenError(t, "redlock://"+strings.Join(hosts, ","), "tls=true")
	_, err := dlock.Open(t.Context(), "redlock://"+strings.Join(hosts, ",")+"?"+ca[1:])
	if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), "tls=true") {
		t.Errorf("ca= without tls=true: %v; want ErrInvalidURL naming tls=true", err)
	}
}
