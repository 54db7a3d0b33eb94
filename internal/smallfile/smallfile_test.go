package smallfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestReadIsBounded(t *testing.T) {
	ctx := context.Background()
	// /dev/zero never ends: unbounded, it exhausted memory.
	if _, err := Read(ctx, "/dev/zero", MaxSecret); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read(/dev/zero) = %v; want ErrTooLarge", err)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, make([]byte, 10), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ctx, p, 10); err != nil || len(b) != 10 {
		t.Errorf("Read of a file at the limit = %d bytes, %v", len(b), err)
	}
	if _, err := Read(ctx, p, 9); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Read past the limit = %v; want ErrTooLarge", err)
	}
	if _, err := Read(ctx, filepath.Join(dir, "missing"), 10); err == nil || errors.Is(err, ErrTooLarge) {
		t.Errorf("Read of a missing file = %v", err)
	}
	// A regular file is read even with an ended ctx, so that a caller
	// reports a wrong file first.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if b, err := Read(done, p, 10); err != nil || len(b) != 10 {
		t.Errorf("Read of a file with an ended ctx = %d bytes, %v", len(b), err)
	}
}

// readBounded runs Read and fails the test if it has not returned in 10 s
// (an open(2) of a FIFO without a writer, or a read from a silent one, had
// waited for ever).
func readBounded(t *testing.T, ctx context.Context, path string) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := Read(ctx, path, MaxSecret)
		ch <- result{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(10 * time.Second):
		// Unblock the reader so the test leaves no goroutine behind.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatalf("Read(%s) has not returned after 10 s", path)
		return nil, nil
	}
}

func TestReadPipeEndsWithCtx(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// No writer: open(2) must not wait for one; the pipe reads as empty.
	if b, err := readBounded(t, context.Background(), p); err != nil || len(b) != 0 {
		t.Errorf("Read of a FIFO without a writer = %q, %v; want empty", b, err)
	}
	// A writer that writes nothing: Read ends with ctx.
	r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0) // so the writer's open does not wait
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := readBounded(t, ctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Read of a silent FIFO = %v; want context.DeadlineExceeded", err)
	}
	// A writer that writes and closes: its content is read.
	go func() {
		_, _ = w.Write([]byte("secret\n"))
		w.Close()
	}()
	if b, err := readBounded(t, context.Background(), p); err != nil || string(b) != "secret\n" {
		t.Errorf("Read of a FIFO with content = %q, %v", b, err)
	}
	if err := Regular(p); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Regular(FIFO) = %v; want ErrNotRegular", err)
	}
}

func TestRegular(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Regular(p); err != nil {
		t.Errorf("Regular(file) = %v", err)
	}
	for _, path := range []string{"/dev/zero", filepath.Dir(p)} {
		if err := Regular(path); !errors.Is(err, ErrNotRegular) {
			t.Errorf("Regular(%s) = %v; want ErrNotRegular", path, err)
		}
	}
	if err := Regular(p + "x"); err == nil || errors.Is(err, ErrNotRegular) {
		t.Errorf("Regular(missing) = %v", err)
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
