package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
)

// PostgresTLS starts a private PostgreSQL with ssl=on and c's server
// certificate, whose pg_hba.conf accepts TCP connections over TLS only
// (hostssl, trust): a connection with sslmode=disable is refused by the
// server. It is Postgres restarted with TLS settings.
func PostgresTLS(t TB, c *TLS) *Server {
	t.Helper()
	s := Postgres(t)
	s.Stop()
	// PostgreSQL wants its key private to the user it runs as.
	key := filepath.Join(s.Dir, "server-key.pem")
	b, err := os.ReadFile(c.KeyFile)
	if err == nil {
		err = os.WriteFile(key, b, 0o600)
	}
	if err == nil && s.cred != nil {
		err = os.Chown(key, int(s.cred.Uid), int(s.cred.Gid))
	}
	hba := filepath.Join(s.Dir, "pg_hba_tls.conf")
	if err == nil {
		err = os.WriteFile(hba, []byte("local all all trust\nhostssl all all 127.0.0.1/32 trust\n"), 0o644)
	}
	if err != nil {
		t.Fatalf("TLS files: %v", err)
	}
	plain := s.args
	s.args = func(port int, dir string) []string {
		return append(plain(port, dir), "-c", "ssl=on", "-c", "ssl_cert_file="+c.CertFile,
			"-c", "ssl_key_file="+key, "-c", "ssl_ca_file="+c.CAFile, "-c", "hba_file="+hba)
	}
	s.ready = func(ctx context.Context, addr string) error {
		conn, err := pgx.Connect(ctx, PostgresTLSURL(s, c))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("restart postgres with TLS: %v", err)
	}
	return s
}

// PostgresTLSURL is the URL of a PostgresTLS server's postgres database,
// verifying its certificate against c's CA (sslmode=verify-full).
func PostgresTLSURL(s *Server, c *TLS) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=verify-full&sslrootcert=%s", s.Addr(), c.CAFile)
}

// MariaDBTLS starts a private mariadbd with c's server certificate and
// require_secure_transport=ON: it refuses connections without TLS.
func MariaDBTLS(t TB, c *TLS) *Server {
	t.Helper()
	return mariadb(t, func() []string {
		return []string{"--ssl-cert=" + c.CertFile, "--ssl-key=" + c.KeyFile, "--ssl-ca=" + c.CAFile,
			"--require-secure-transport=ON"}
	})
}

// MariaDBTLSURL is a dlock URL (TLS, verified against c's CA) for the
// MariaDBTLS server's database db, created if missing.
func MariaDBTLSURL(t TB, s *Server, c *TLS, db string) string {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.TLS = "root", "tcp", s.Addr(), c.ClientConfig(t)
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("%v", err)
	}
	pool := sql.OpenDB(conn)
	defer pool.Close()
	if _, err := pool.Exec("CREATE DATABASE IF NOT EXISTS " + db); err != nil {
		t.Fatalf("%v", err)
	}
	return fmt.Sprintf("mysql://root@%s/%s?tls=true&ca=%s", s.Addr(), db, c.CAFile)
}

// zkTLSClasspath adds the Netty jars the secure client port needs, which
// the zookeeper package's jar does not list.
const zkTLSClasspath = zkClasspath + ":/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar:" +
	"/usr/share/java/netty-transport-native-unix-common.jar"

// ZooKeeperTLS starts a private standalone ZooKeeper (tickTime 250ms) whose
// only client port is its secure one (Netty, TLS with c's server
// certificate; client certificates not required).
func ZooKeeperTLS(t TB, c *TLS) *Server {
	t.Helper()
	java := zkJava(t)
	s := &Server{Name: "zookeeper (TLS)", bin: java}
	s.args = func(port int, dir string) []string {
		// ZooKeeper's PEM key store is one file: the key and its certificate.
		ks := filepath.Join(dir, "keystore.pem")
		kb, err1 := os.ReadFile(c.KeyFile)
		cb, err2 := os.ReadFile(c.CertFile)
		if err1 == nil && err2 == nil {
			_ = os.WriteFile(ks, append(kb, cb...), 0o600)
		}
		cfg := filepath.Join(dir, "zoo.cfg")
		body := fmt.Sprintf("tickTime=250\ndataDir=%s\nsecureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n"+
			"admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n",
			filepath.Join(dir, "data"), port)
		_ = os.WriteFile(cfg, []byte(body), 0o600)
		return []string{"-Xmx256m", "-cp", zkTLSClasspath, "-Dzookeeper.log.dir=" + dir,
			"-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
			"-Dzookeeper.ssl.keyStore.location=" + ks, "-Dzookeeper.ssl.keyStore.type=PEM",
			"-Dzookeeper.ssl.trustStore.location=" + c.CAFile, "-Dzookeeper.ssl.trustStore.type=PEM",
			"-Dzookeeper.ssl.clientAuth=none",
			"org.apache.zookeeper.server.ZooKeeperServerMain", cfg}
	}
	s.ready = zkReadyOver(tlsDial(c, t))
	s.start(t)
	return s
}
