package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	_ "github.com/go-sql-driver/mysql" // the readiness check's driver
)

// sbinDirs are where Debian keeps server binaries.
var sbinDirs = []string{"/usr/sbin"}

// MariaDB starts a private mariadbd in a temp datadir made by
// mariadb-install-db, with root (no password) reachable over TCP.
func MariaDB(t TB) *Server {
	t.Helper()
	return mariadb(t, nil)
}

// galeraProvider is Debian's galera-4 library.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// MariaDBGalera starts a private mariadbd as a one-node Galera cluster
// (wsrep on, bootstrapped with gcomm://), its group port on a free loopback
// port: what GET_LOCK refuses to work on.
func MariaDBGalera(t TB) *Server {
	t.Helper()
	if _, err := os.Stat(galeraProvider); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s not found and %s=1: run scripts/install-deps.sh", galeraProvider, RequireEnv)
		}
		t.Skipf("%s not found: install galera-4", galeraProvider)
	}
	return mariadb(t, func() []string {
		gport, err := FreePort()
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		return []string{"--wsrep-on=ON", "--wsrep-provider=" + galeraProvider, "--wsrep-cluster-address=gcomm://",
			"--wsrep-node-address=127.0.0.1", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
			fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d", gport, gport+1)}
	})
}

// mariadb starts mariadbd with extra arguments, asked for at each start.
func mariadb(t TB, extra func() []string) *Server {
	t.Helper()
	install := LookBinary(t, "mariadb-install-db", sbinDirs...)
	s := &Server{Name: "mariadbd", bin: LookBinary(t, "mariadbd", sbinDirs...)}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal", "--skip-test-db"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v: %s", err, tail(string(out)))
	}
	s.Dir = dir
	s.args = func(port int, _ string) []string {
		a := []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(dir, "mysqld.sock"), "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--skip-name-resolve", "--innodb-flush-log-at-trx-commit=2", "--max-connections=300", "--log-error=" + filepath.Join(dir, "error.log")}
		if os.Geteuid() == 0 {
			a = append(a, "--user=root")
		}
		if extra != nil {
			a = append(a, extra()...)
		}
		return a
	}
	s.ready = func(ctx context.Context, addr string) error {
		db, err := sql.Open("mysql", "root@tcp("+addr+")/?tls=preferred") // TLS where the server has it (MariaDBTLS)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	}
	s.start(t)
	return s
}

// MariaDBURL is a dlock URL for the server's database db (created if
// missing).
func MariaDBURL(t TB, s *Server, db string) string {
	t.Helper()
	conn, err := sql.Open("mysql", "root@tcp("+s.Addr()+")/")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer conn.Close()
	if _, err := conn.Exec("CREATE DATABASE IF NOT EXISTS " + db); err != nil {
		t.Fatalf("%v", err)
	}
	return fmt.Sprintf("mysql://root@%s/%s", s.Addr(), db)
}
