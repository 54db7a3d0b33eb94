package drivertest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// DocLines returns the lines of file (a source file of the package under
// test, read from the test's directory) that the package doc sets as code
// ("//" and a tab) and that start with prefix, without the marker: the
// commands the doc tells users to run (a grant, say), so that a test runs
// exactly those. With a section, only the lines after the doc's heading
// "# section" count. It fails the test when there is none.
func DocLines(t *testing.T, file, section, prefix string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	if section != "" {
		_, text, _ = strings.Cut(text, "// # "+section+"\n")
	}
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l, ok := strings.CutPrefix(l, "//\t"); ok && strings.HasPrefix(l, prefix) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s: no %q lines in the package doc", file, prefix)
	}
	return lines
}

// WantLockRefused wants a Lock of name on c (a client of a user that lacks
// a right) to fail at once, not when its 20s bound ends, with an error that
// wraps dlock.ErrInvalidConfig and names the missing right (want).
func WantLockRefused(t *testing.T, c *dlock.Client, name, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := c.Mutex(name).Lock(ctx)
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, dlock.ErrInvalidConfig) || ctx.Err() != nil {
		t.Errorf("Lock(%s): %v; want at once ErrInvalidConfig naming %q", name, err, want)
	}
}

// WantKept wants the lease l, which c holds on name, kept through another
// tenant's attempts on it (the least-privilege tests): l extends by ttl, is
// not lost, and c inspects name held with l's token and owner.
func WantKept(t *testing.T, c *dlock.Client, l *dlock.Lease, name string, ttl time.Duration) {
	t.Helper()
	ctx := t.Context()
	if err := l.Extend(ctx, ttl); err != nil {
		t.Fatalf("a's lease after b's attempts: %v", err)
	}
	select {
	case <-l.Done():
		t.Fatalf("a's lease lost: %v", l.Err())
	default:
	}
	info, err := c.Inspect(ctx, name)
	if err != nil || !info.Held || info.Token != l.Token() || info.Owner != l.Owner() {
		t.Fatalf("a's lock after b's attempts: %+v, %v; want held with the lease's token %d and owner %q", info, err, l.Token(), l.Owner())
	}
}
