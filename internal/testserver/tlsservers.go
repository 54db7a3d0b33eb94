package testserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Servers that speak TLS only: each listens on its TLS port alone (no
// plaintext port), with the certificate c.CertFile, and trusts c's CA for
// client certificates. Their readiness checks talk TLS with c's client
// certificate.

// tlsDial is the dialFunc that connects over TLS as c's client.
func tlsDial(c *TLS, t TB) dialFunc {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return boundedDial(ctx, &tls.Dialer{Config: c.ClientConfig(t)}, addr)
	}
}

// redisTLSArgs are redis-server's arguments for a TLS-only port: client
// certificates optional (Redis requires them by default).
func redisTLSArgs(c *TLS, port int) []string {
	return []string{"--port", "0", "--tls-port", strconv.Itoa(port),
		"--tls-cert-file", c.CertFile, "--tls-key-file", c.KeyFile, "--tls-ca-cert-file", c.CAFile,
		"--tls-auth-clients", "optional", "--tls-replication", "yes"}
}

// redisTLSReady sends PING over TLS and wants PONG.
func redisTLSReady(c *TLS, t TB) func(ctx context.Context, addr string) error {
	return probeReady(tlsDial(c, t), redisPing)
}

func redisPing(conn net.Conn) error {
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// RedisTLS starts a private redis-server that listens on a TLS port only
// (Port), with c's server certificate. extra are more arguments, as for
// Redis.
func RedisTLS(t TB, c *TLS, extra ...string) *Server {
	t.Helper()
	s := &Server{Name: "redis-server (TLS)", bin: LookBinary(t, "redis-server")}
	s.args = func(port int, dir string) []string {
		a := []string{"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--protected-mode", "yes", "--logfile", ""}
		return append(append(a, redisTLSArgs(c, port)...), extra...)
	}
	s.ready = redisTLSReady(c, t)
	s.start(t)
	return s
}

// RedisSentinelTLS starts a Redis Sentinel on a TLS port only, monitoring
// the TLS master under masterName (quorum 1), which it reaches over TLS.
func RedisSentinelTLS(t TB, c *TLS, master *Server, masterName string) *Server {
	t.Helper()
	s := &Server{Name: "redis-sentinel (TLS)", bin: LookBinary(t, "redis-server")}
	s.args = func(port int, dir string) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port 0\ntls-port %d\nbind 127.0.0.1\ndir %s\n"+
			"tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\ntls-auth-clients optional\ntls-replication yes\n"+
			"sentinel monitor %s %s %d 1\nsentinel down-after-milliseconds %s 1000\n",
			port, dir, c.CertFile, c.KeyFile, c.CAFile, masterName, master.Host, master.Port, masterName)
		_ = os.WriteFile(conf, []byte(body), 0o600)
		return []string{conf, "--sentinel"}
	}
	s.ready = redisTLSReady(c, t)
	s.start(t)
	return s
}

// RedisClusterTLS starts n redis-servers in cluster mode (masters only) on
// TLS ports only, the cluster bus over TLS too, and joins them.
func RedisClusterTLS(t TB, c *TLS, n int) []*Server {
	t.Helper()
	return startRedisCluster(t, n, redisClusterSpec{
		name:  "redis-server (TLS cluster)",
		ready: redisTLSReady(c, t),
		dial:  tlsDial(c, t),
		args: func(port int, dir string) []string {
			return append(append(clusterNodeArgs(dir), "--tls-cluster", "yes"), redisTLSArgs(c, port)...)
		},
		cli: []string{"--tls", "--cacert", c.CAFile, "--cert", c.ClientCertFile, "--key", c.ClientKeyFile},
	})
}

// EtcdTLS starts a private single-member etcd whose client URL is https
// only, with c's server certificate. With clientCertAuth it also requires
// a client certificate signed by c's CA (etcd's --client-cert-auth).
func EtcdTLS(t TB, c *TLS, clientCertAuth bool) *Server {
	t.Helper()
	s := &Server{Name: "etcd (TLS)", bin: LookBinary(t, "etcd")}
	s.args = func(port int, dir string) []string {
		a := etcdArgs("https", port, dir, "--cert-file", c.CertFile, "--key-file", c.KeyFile, "--trusted-ca-file", c.CAFile)
		if clientCertAuth {
			a = append(a, "--client-cert-auth")
		}
		return a
	}
	s.ready = func(ctx context.Context, addr string) error {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c.ClientConfig(t)}}
		defer hc.CloseIdleConnections()
		return etcdHealth(ctx, hc, "https://"+addr)
	}
	s.start(t)
	return s
}

// MemcachedTLS starts a private memcached (eviction disabled) that speaks
// TLS only (-Z), with c's server certificate.
func MemcachedTLS(t TB, c *TLS) *Server {
	t.Helper()
	s := &Server{Name: "memcached (TLS)", bin: LookBinary(t, "memcached")}
	s.args = func(port int, _ string) []string {
		return memcachedArgs(port, "-Z", "-o", "ssl_chain_cert="+c.CertFile+",ssl_key="+c.KeyFile+",ssl_ca_cert="+c.CAFile)
	}
	s.ready = probeReady(tlsDial(c, t), memcachedVersion)
	s.start(t)
	return s
}
