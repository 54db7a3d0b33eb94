package smallfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestReadIsBounded(t *testing.T) {
	// /dev/zero never ends: unbounded, it exhausted memory.
	if _, err := Read("/dev/zero", MaxSecret); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read(/dev/zero) = %v; want ErrTooLarge", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, make([]byte, 10), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(p, 10); err != nil || len(b) != 10 {
		t.Errorf("Read of a file at the limit = %d bytes, %v", len(b), err)
	}
	if _, err := Read(p, 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read past the limit = %v; want ErrTooLarge", err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), 10); err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf("Read of a missing file = %v", err)
	}
}

func TestOthersCanRead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if OthersCanRead(p) {
		t.Error("mode 0600: OthersCanRead = true")
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if !OthersCanRead(p) {
		t.Error("mode 0644: OthersCanRead = false")
	}
	if OthersCanRead("/dev/zero") {
		t.Error("a device: OthersCanRead = true; want false (not a file a secret is kept in)")
	}
}
