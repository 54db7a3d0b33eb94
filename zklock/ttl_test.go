package zklock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A ZooKeeper hold lasts as long as its session, proven for about one
// session timeout after each answer. A TTL so long that dlock could never
// return a grant of it (every grant "too late", released and retried) is
// refused when the lock is made, with an error that names the session
// timeout and how to raise it; a TTL within the limit is honoured.
func TestTTLBeyondSessionRefused(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	c := drivertest.MustOpen(t, "zk://"+srv.Addr()+"/ttl?session_timeout=2s")

	long := c.Mutex("long", dlock.WithTTL(time.Hour))
	err := long.Err()
	if !errors.Is(err, dlock.ErrInvalidTTL) {
		t.Fatalf("Mutex with a 1h TTL on a 2s session: Err = %v; want ErrInvalidTTL", err)
	}
	if !strings.Contains(err.Error(), "session_timeout") || !strings.Contains(err.Error(), "session timeout 2s") {
		t.Errorf("error %q does not name the session timeout and how to raise it", err)
	}

	// TTLs within the limit are granted at once on a free lock.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, ttl := range []time.Duration{30 * time.Second, dlock.DefaultTTL} {
		l, err := c.Mutex("ok", dlock.WithTTL(ttl)).Lock(ctx)
		if err != nil {
			t.Fatalf("TTL %v on a 2s session: %v", ttl, err)
		}
		_ = l.Unlock(ctx)
	}
}
