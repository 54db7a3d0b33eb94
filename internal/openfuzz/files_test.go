package openfuzz

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Every file a URL names is read with a bound, whether dlock reads it or
// the store's client library does: a wrong path (/dev/zero, a log, a disk
// image) is ErrInvalidURL saying the file is too large, not a process out
// of memory. The file here is 16 MiB of nothing (sparse), over every bound
// yet harmless to a reader without one.
func TestFileParamsAreBounded(t *testing.T) {
	big := bigFile(t, t.TempDir())
	for _, rawURL := range []string{
		"nats://127.0.0.1:1/b?token_file=" + big,
		"nats://127.0.0.1:1/b?nkey=" + big,
		"nats://127.0.0.1:1/b?creds=" + big,
		"tls://127.0.0.1:1/b?ca=" + big,
		"postgres://u@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=" + big,
		"postgres://u@127.0.0.1:1/db?sslmode=require&sslcert=" + big + "&sslkey=" + big,
		"postgres://u@127.0.0.1:1/db?passfile=" + big,
		"postgres://u@127.0.0.1:1/db?servicefile=" + big,
		"rediss://127.0.0.1:1?ca=" + big,
		"mysql://u@127.0.0.1:1/db?tls=true&ca=" + big,
		"etcd://127.0.0.1:1?password_file=" + big,
	} {
		err, ok := openSafely(t, rawURL)
		if !ok {
			t.Fatalf("%s: not a loopback URL", rawURL)
		}
		if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), "too large") {
			t.Errorf("Open(%s) = %v; want ErrInvalidURL saying the file is too large", rawURL, err)
		}
	}
}

// bigFile makes a 16 MiB sparse file in dir and returns its path.
func bigFile(t *testing.T, dir string) string {
	t.Helper()
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(16 << 20); err != nil {
		t.Fatal(err)
	}
	return big
}

// A NATS URL carries a token as its user name (nats://TOKEN@host): Open's
// errors hide it as they hide a password.
func TestNATSTokenHidden(t *testing.T) {
	for _, rawURL := range []string{"nats://SUPERSECRETTOKEN@127.0.0.1:1/b", "tls://SUPERSECRETTOKEN@127.0.0.1:1/b", "nats://SUPERSECRETTOKEN@127.0.0.1:1/b?bad=1"} {
		err, _ := openSafely(t, rawURL)
		if err == nil || strings.Contains(err.Error(), "SUPERSECRETTOKEN") {
			t.Errorf("Open(%s) = %v; want an error without the token", rawURL, err)
		}
	}
}

// A named pipe in a file parameter (a wrong path, or a pipe whose writer
// is gone) is an error, not an Open that never returns: dlock opens it
// without waiting for a writer and reads it until ctx ends, and refuses it
// where the client library reads the file again by itself.
func TestFileParamsArePipes(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	urls := []string{
		"nats://127.0.0.1:1/b?token_file=" + fifo,
		"nats://127.0.0.1:1/b?nkey=" + fifo,
		"nats://127.0.0.1:1/b?creds=" + fifo,
		"tls://127.0.0.1:1/b?ca=" + fifo,
		"postgres://u@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=" + fifo,
		"postgres://u@127.0.0.1:1/db?sslmode=require&sslcert=" + fifo + "&sslkey=" + fifo,
		"postgres://u@127.0.0.1:1/db?passfile=" + fifo,
		"postgres://u@127.0.0.1:1/db?servicefile=" + fifo + "&service=s",
		"rediss://127.0.0.1:1?ca=" + fifo,
		"mysql://u@127.0.0.1:1/db?tls=true&ca=" + fifo,
		"etcd://127.0.0.1:1?password_file=" + fifo,
		"zk://127.0.0.1:1?tls=true&ca=" + fifo,
	}
	open := func(rawURL string) error {
		ch := make(chan error, 1)
		go func() {
			err, _ := openSafely(t, rawURL)
			ch <- err
		}()
		select {
		case err := <-ch:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("Open(%s) has not returned after 20 s", rawURL)
			return nil
		}
	}
	for _, rawURL := range urls {
		if err := open(rawURL); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("no writer: Open(%s) = %v; want ErrInvalidURL", rawURL, err)
		}
	}
	// A writer that never writes (O_RDWR holds the pipe open without
	// waiting for a reader).
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, rawURL := range urls {
		if err := open(rawURL); err == nil {
			t.Errorf("silent writer: Open(%s) succeeded", rawURL)
		}
	}
}

// pgx also takes its files from the environment (PGSSLROOTCERT, ...) and
// from a service file: those are bounded as the URL's are.
func TestPGFileEnvIsBounded(t *testing.T) {
	dir := t.TempDir()
	big := bigFile(t, dir)
	service := filepath.Join(dir, "pg_service.conf")
	if err := os.WriteFile(service, []byte("[s]\nsslrootcert="+big+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env    map[string]string
		rawURL string
	}{
		{map[string]string{"PGSSLROOTCERT": big}, "postgres://u@127.0.0.1:1/db?sslmode=verify-full"},
		{map[string]string{"PGSSLCERT": big, "PGSSLKEY": big}, "postgres://u@127.0.0.1:1/db?sslmode=require"},
		{map[string]string{"PGSERVICEFILE": service}, "postgres://u@127.0.0.1:1/db?service=s&sslmode=verify-full"},
		{map[string]string{"PGSERVICEFILE": service, "PGSERVICE": "s"}, "postgres://u@127.0.0.1:1/db?sslmode=verify-full"},
		{map[string]string{"PGSERVICEFILE": big, "PGSERVICE": "s"}, "postgres://u@127.0.0.1:1/db"},
		// pgx reads sslrootcert whatever sslmode says.
		{map[string]string{"PGSSLROOTCERT": big, "PGSSLMODE": "disable"}, "postgres://u@127.0.0.1:1/db"},
	} {
		t.Run("", func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			err, _ := openSafely(t, c.rawURL)
			if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), "too large") {
				t.Errorf("%v: Open(%s) = %v; want ErrInvalidURL saying the file is too large", c.env, c.rawURL, err)
			}
		})
	}
	// pgx's defaults in the home directory are checked too.
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ".postgresql"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(big, filepath.Join(home, ".postgresql", "root.crt")); err != nil {
		t.Fatal(err)
	}
	t.Run("home", func(t *testing.T) {
		t.Setenv("HOME", home)
		err, _ := openSafely(t, "postgres://u@127.0.0.1:1/db?sslmode=verify-full")
		if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), "too large") {
			t.Errorf("~/.postgresql/root.crt too large: Open = %v; want ErrInvalidURL saying the file is too large", err)
		}
	})
	// Files pgx would not read are not checked: a missing passfile (pgx
	// ignores it) or one for a URL with a password; client certificates
	// with sslmode=disable.
	for _, c := range []struct {
		env    map[string]string
		rawURL string
	}{
		{map[string]string{"PGPASSFILE": filepath.Join(dir, "missing")}, "postgres://u@127.0.0.1:1/db"},
		{map[string]string{"PGPASSFILE": big}, "postgres://u:pw@127.0.0.1:1/db"},
		{map[string]string{"PGSSLCERT": big, "PGSSLKEY": big}, "postgres://u@127.0.0.1:1/db?sslmode=disable"},
		{map[string]string{"PGSSLCERT": big, "PGSSLKEY": big, "PGSSLMODE": "disable"}, "postgres://u@127.0.0.1:1/db"},
		{map[string]string{"PGSSLCERT": big, "PGSSLKEY": big}, "postgres://u@127.0.0.1:1/db?sslmode=require&sslcertmode=disable"},
	} {
		t.Run("", func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if err, _ := openSafely(t, c.rawURL); errors.Is(err, dlock.ErrInvalidURL) {
				t.Errorf("%v: Open(%s) = %v; want no URL error (pgx does not read the file)", c.env, c.rawURL, err)
			}
		})
	}
	// pgx reads the URL as libpq does: an empty password is none (it reads
	// ~/.pgpass), '+' in a path is a plus, the last of a repeated parameter
	// wins. dlock's checks read it the same way (each of these hung Open on
	// a FIFO that dlock had not checked).
	fifoHome := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoHome, ".pgpass"), 0o600); err != nil {
		t.Fatal(err)
	}
	plus := filepath.Join(dir, "a+b")
	if err := os.Symlink(big, plus); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ rawURL, want string }{
		{"postgres://u:@127.0.0.1:1/db?sslmode=disable", "passfile"},
		{"postgres://u@127.0.0.1:1/db?password=x&password=", "password is given twice"},
		{"postgres://u@127.0.0.1:1/db?sslmode=disable&sslmode=prefer", "sslmode is given twice"},
		{"postgres://u@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=" + plus, "too large"},
	} {
		t.Run("", func(t *testing.T) {
			t.Setenv("HOME", fifoHome)
			done := make(chan error, 1)
			go func() { err, _ := openSafely(t, c.rawURL); done <- err }()
			select {
			case err := <-done:
				if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("Open(%s) = %v; want ErrInvalidURL saying %q", c.rawURL, err, c.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Open(%s) has not returned after 20 s", c.rawURL)
			}
		})
	}
	// A file in the URL takes the environment's place, as in pgx.
	t.Setenv("PGSSLROOTCERT", big)
	err, _ := openSafely(t, "postgres://u@127.0.0.1:1/db?sslmode=verify-full&sslrootcert=system")
	if err != nil && strings.Contains(err.Error(), "too large") {
		t.Errorf("sslrootcert=system in the URL with PGSSLROOTCERT set: %v", err)
	}
}
