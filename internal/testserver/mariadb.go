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
		return a
	}
	s.ready = func(ctx context.Context, addr string) error {
		db, err := sql.Open("mysql", "root@tcp("+addr+")/")
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
