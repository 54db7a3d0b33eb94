package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestOpenRefusedSaysSo: Open of a URL whose every address refuses the
// connection fails at once with the refusal, on every kind of Redis URL.
// For Sentinel it waited out the ctx and said "context deadline exceeded"
// (the CLI: "no answer"), and returned some 0.7 s past its ctx too: go-redis
// retries its sentinels' dials, whatever their ctx, and its Close waits for
// them.
func TestOpenRefusedSaysSo(t *testing.T) {
	p1, p2 := testserver.ClosedAddr(t), testserver.ClosedAddr(t)
	r := testserver.Redis(t)
	for _, u := range []string{
		fmt.Sprintf("redis://%s", p1),
		fmt.Sprintf("redis+sentinel://%s/m", p1),
		fmt.Sprintf("redis+sentinel://%s,%s/m", p1, p2),
		fmt.Sprintf("redis+cluster://%s,%s", p1, p2),
		fmt.Sprintf("redis+cluster://%s,%s", p1, p1), // one address twice: it took the slow path
		fmt.Sprintf("rediss+sentinel://%s/m?insecure_skip_verify=true", p1),
	} {
		// Generous: go-redis's retries of a refused dial alone take 1.6 s.
		drivertest.WantOpenRefused(t, u, 1200*time.Millisecond)
	}
	// One refusing sentinel among live addresses is no reason to give up:
	// here the other address is a plain server (not a sentinel), whose
	// answer go-redis then reports.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := dlock.Open(ctx, fmt.Sprintf("redis+sentinel://%s,%s/m", p1, r.Addr()))
	if err == nil || errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("sentinels of which one refuses: %v; want the other's answer", err)
	}
}
