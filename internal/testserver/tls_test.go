package testserver

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
)

// The test CA signs a server certificate valid for the names asked for and
// no other, and a client certificate.
func TestNewTLS(t *testing.T) {
	c := NewTLS(t)
	pool := x509.NewCertPool()
	b, err := os.ReadFile(c.CAFile)
	if err != nil || !pool.AppendCertsFromPEM(b) {
		t.Fatalf("CA file: %v", err)
	}
	pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("server certificate for 127.0.0.1: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err == nil || !strings.Contains(err.Error(), "localhost") {
		t.Errorf("server certificate accepted for localhost: %v", err)
	}
	if _, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if cfg := c.ClientConfig(t); cfg.RootCAs == nil || len(cfg.Certificates) != 1 {
		t.Errorf("ClientConfig = %+v", cfg)
	}
}
