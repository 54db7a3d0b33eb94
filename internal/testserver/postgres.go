package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/jackc/pgx/v5"
)

// pgBinDirs are where Debian keeps PostgreSQL's server binaries.
var pgBinDirs = []string{"/usr/lib/postgresql/*/bin"}

// Postgres starts a private PostgreSQL (initdb, then postgres) with trust
// authentication for the superuser "postgres". PostgreSQL refuses to run as
// root, so as root it runs as the postgres user. URL returns its address.
func Postgres(t TB) *Server {
	t.Helper()
	initdb := LookBinary(t, "initdb", pgBinDirs...)
	s := &Server{Name: "postgres", bin: LookBinary(t, "postgres", pgBinDirs...)}
	dir, err := os.MkdirTemp("", "dlock-pg-") // not t.TempDir: its parents are root's alone
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user (from the postgresql package): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("%v", err)
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, tail(string(out)))
	}
	s.Dir = dir
	s.args = func(port int, _ string) []string {
		return []string{"-D", data, "-p", strconv.Itoa(port), "-k", dir, "-F",
			"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"}
	}
	s.ready = func(ctx context.Context, addr string) error {
		conn, err := pgx.Connect(ctx, "postgres://postgres@"+addr+"/postgres?sslmode=disable")
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}
	s.start(t)
	return s
}

// PostgresURL is the URL of the server's postgres database.
func PostgresURL(s *Server) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
}
