package drivertest

import (
	"context"
	"errors"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// WantOpenFails wants dlock.Open(u) to fail, within 30 seconds, with an
// error that says want (the reason, where a bare "context deadline
// exceeded" used to come after the whole connect timeout).
func WantOpenFails(t *testing.T, u, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := dlock.Open(ctx, u)
	if err == nil {
		_ = c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Open(%s): %v; want it to say %q", u, err, want)
	}
}

// WantOpenRefused wants dlock.Open(u), for a URL whose every address
// refuses connections, to fail with the refusal (errors.Is
// syscall.ECONNREFUSED) within bound, not at the end of its ctx (5 s) with
// "context deadline exceeded".
func WantOpenRefused(t *testing.T, u string, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	c, err := dlock.Open(ctx, u)
	took := time.Since(start)
	if err == nil {
		_ = c.Close()
		t.Fatalf("%s: Open succeeded", u)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s: %v; want the refusal", u, err)
	}
	if took > bound {
		t.Errorf("%s: Open took %v to say %v", u, took.Round(time.Millisecond), err)
	}
}

// WantMaxHeldFull wants TryLock through c, a client of a SQL backend opened
// with max_held=1, to say that max_held is used up (not "held by another
// owner") while it holds one lock, and still match ErrNotAcquired.
func WantMaxHeldFull(t *testing.T, c *dlock.Client) {
	t.Helper()
	l, err := c.Mutex(lockName(t) + "/a").TryLock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(t.Context()) }()
	_, err = c.Mutex(lockName(t) + "/b").TryLock(t.Context())
	if !errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "max_held") || strings.Contains(err.Error(), "another owner") {
		t.Errorf("TryLock with max_held used up: %v; want ErrNotAcquired naming max_held", err)
	}
}

// WantHugePermitsRefused wants a semaphore of MaxInt64 permits refused with
// ErrInvalidConfig naming the largest count, where the SQL backends
// returned the driver's raw out-of-range error.
func WantHugePermitsRefused(t *testing.T, c *dlock.Client, largest string) {
	t.Helper()
	_, err := c.Semaphore(lockName(t), math.MaxInt64).TryAcquire(t.Context())
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), largest) {
		t.Errorf("TryAcquire with MaxInt64 permits: %v; want ErrInvalidConfig naming %s", err, largest)
	}
}
