package testserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLS is a certificate authority made for one test, and certificates it
// signed, as PEM files in a temp dir: nothing is checked in.
//
// CertFile/KeyFile are the server's, valid for the names NewTLS was given
// (by default 127.0.0.1 and server.dlock.test only, so a client dialling
// "localhost" sees a certificate for another name). ClientCertFile/ClientKeyFile are a client
// certificate (CN "dlock-client") for servers that authenticate clients by
// certificate. Every file is readable by the servers' users (PostgreSQL's
// key must be owned by it: see PostgresTLS).
type TLS struct {
	Dir            string
	CAFile         string // the CA's certificate
	CertFile       string // the server's certificate
	KeyFile        string // the server's key
	ClientCertFile string // a client certificate signed by the CA
	ClientKeyFile  string

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	pool  *x509.CertPool
}

// NewTLS makes a CA and, signed by it, a server certificate for hosts (IP
// addresses or DNS names; default 127.0.0.1 and server.dlock.test) and a
// client certificate.
func NewTLS(t TB, hosts ...string) *TLS {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "server.dlock.test"}
	}
	dir, err := os.MkdirTemp("", "dlock-tls-") // not t.TempDir: servers run as other users read it
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("%v", err)
	}
	c := &TLS{Dir: dir}
	c.caKey = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "dlock test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &c.caKey.PublicKey, c.caKey)
	if err != nil {
		t.Fatalf("CA: %v", err)
	}
	if c.ca, err = x509.ParseCertificate(der); err != nil {
		t.Fatalf("CA: %v", err)
	}
	c.pool = x509.NewCertPool()
	c.pool.AddCert(c.ca)
	c.CAFile = filepath.Join(dir, "ca.pem")
	writePEM(t, c.CAFile, "CERTIFICATE", der)
	c.CertFile, c.KeyFile = c.Issue(t, "server", hosts...)
	c.ClientCertFile, c.ClientKeyFile = c.Issue(t, "dlock-client")
	return c
}

// Issue signs a certificate with common name cn for hosts (none: a client
// certificate) and writes it and its key into the TLS dir as cn.pem and
// cn-key.pem.
func (c *TLS) Issue(t TB, cn string, hosts ...string) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(hosts) > 0 {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca, &key.PublicKey, c.caKey)
	if err != nil {
		t.Fatalf("certificate %s: %v", cn, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("key %s: %v", cn, err)
	}
	certFile, keyFile = filepath.Join(c.Dir, cn+".pem"), filepath.Join(c.Dir, cn+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

// Localhost is addr (host:port) with its host replaced by localhost: the
// same server by a name its certificate from NewTLS does not carry (unless
// NewTLS was given it).
func Localhost(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort("localhost", port)
}

// ClientConfig is a client TLS configuration that trusts the CA and
// presents the client certificate.
func (c *TLS) ClientConfig(t TB) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKeyFile)
	if err != nil {
		t.Fatalf("client certificate: %v", err)
	}
	return &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}

func newKey(t TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	return k
}

func serial(t TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("serial: %v", err)
	}
	return n
}

// writePEM writes one PEM block, readable by all: the servers' users read
// the keys, which protect nothing beyond the test.
func writePEM(t TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
}
