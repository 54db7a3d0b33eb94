package openfuzz

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlock/dlock"
)

// Every file a URL names is read with a bound, whether dlock reads it or
// the store's client library does: a wrong path (/dev/zero, a log, a disk
// image) is ErrInvalidURL saying the file is too large, not a process out
// of memory. The file here is 16 MiB of nothing (sparse), over every bound
// yet harmless to a reader without one.
func TestFileParamsAreBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(16 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
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
