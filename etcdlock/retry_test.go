package etcdlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retryWithin gives up once its limit has passed, as a ctx with that
// deadline would: the error wraps context.DeadlineExceeded and tells the
// last error, and no attempt's ctx outlives the limit.
func TestRetryWithinEndsAtLimit(t *testing.T) {
	const limit = 100 * time.Millisecond
	unavailable := status.Error(codes.Unavailable, "no leader")
	until := time.Now().Add(limit) // at or before retryWithin's
	var first time.Time            // at or after retryWithin's start
	attempts := 0
	retried, err := retryWithin(t.Context(), limit, func(ctx context.Context) error {
		attempts++
		if attempts == 1 {
			first = time.Now()
		}
		if d, ok := ctx.Deadline(); !ok || d.After(first.Add(limit)) {
			t.Errorf("attempt %d: deadline %v (set: %v), want by the limit %v", attempts, d, ok, first.Add(limit))
		}
		return unavailable
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no leader") {
		t.Fatalf("err = %v, want one wrapping context.DeadlineExceeded with the last error", err)
	}
	if !retried || attempts < 2 {
		t.Fatalf("retried = %v after %d attempts, want a retry", retried, attempts)
	}
	if time.Now().Before(until) {
		t.Fatal("gave up before the limit")
	}
}

// retryWithin stops at once on an error a retry cannot mend, and when ctx
// ends first, its error is ctx's.
func TestRetryWithinStops(t *testing.T) {
	denied := status.Error(codes.PermissionDenied, "denied")
	attempts := 0
	retried, err := retryWithin(t.Context(), time.Hour, func(context.Context) error { attempts++; return denied })
	if !errors.Is(err, denied) || retried || attempts != 1 {
		t.Fatalf("err = %v, retried = %v, attempts = %d; want the error after one attempt", err, retried, attempts)
	}
	ctx, cancel := context.WithCancel(t.Context())
	_, err = retryWithin(ctx, time.Hour, func(context.Context) error {
		cancel()
		return status.Error(codes.Unavailable, "no leader")
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// retrySettled's attempt runs on when ctx ends meanwhile (a put must reach
// its reply before the delete that undoes it), and ends with ctx's error.
func TestRetrySettledAttemptOutlivesCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	_, err := retrySettled(ctx, func(actx context.Context) error {
		cancel()
		if actx.Err() != nil {
			t.Error("the attempt's ctx ended with the caller's")
		}
		if _, ok := actx.Deadline(); !ok {
			t.Error("the attempt has no deadline")
		}
		return status.Error(codes.Unavailable, "no leader")
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A retry cut short by its ctx still tells its last error to errors.Is:
// "lease not found" is a certain answer (no key went in), which the
// acquire acts on (a new session; a key name not burnt).
func TestEndedKeepsLastError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := retrySettled(ctx, func(context.Context) error { return rpctypes.ErrLeaseNotFound })
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) || !errors.Is(err, context.Canceled) {
		t.Fatalf("retry whose ctx ended, last answer lease not found: %v; want both errors.Is", err)
	}
}
