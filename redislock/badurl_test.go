package redislock_test

import (
	"testing"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// TestBadURLsAreErrors: URLs that made Open panic (no host: index out of
// range; pool_size=-1: makechan) or run out of memory (a pool of 10⁸) are
// ErrInvalidURL with the reason. No server is needed: Open refuses them
// before it dials.
func TestBadURLsAreErrors(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"redis://", "no host"},
		{"redis:///", "no host"},
		{"rediss:///", "no host"},
		{"redis+sentinel:///m", "no host"},
		{"redis+cluster:///", "no host"},
		{"redis://127.0.0.1:1/0?pool_size=-1", "pool_size=-1"},
		{"redis://127.0.0.1:1/0?pool_size=100000000", "pool_size=100000000"},
		{"redis+cluster://127.0.0.1:1?max_active_conns=-1", "max_active_conns=-1"},
		{"redis+sentinel://127.0.0.1:1/m?min_idle_conns=x", "min_idle_conns: want an integer"},
		// go-redis took these as given: every dial, or every wait for a
		// pooled connection, failed at once.
		{"redis://127.0.0.1:1/0?dial_timeout=-1s", "dial_timeout=-1s"},
		{"redis+cluster://127.0.0.1:1?dial_timeout=-5", "dial_timeout=-5"},
		{"redis://127.0.0.1:1/0?pool_timeout=-1s", "pool_timeout=-1s"},
		// go-redis reads 0 as "no timeout", -1: the same immediate failure.
		{"redis://127.0.0.1:1/0?dial_timeout=0", "dial_timeout=0"},
		{"redis://127.0.0.1:1/0?dial_timeout=0s", "dial_timeout=0s"},
		{"redis://127.0.0.1:1/0?dial_timeout=9999999999", "dial_timeout=9999999999"}, // overflowed to negative
		// go-redis uses the last of a repeated parameter.
		{"redis://127.0.0.1:1/0?dial_timeout=1s&dial_timeout=-1s", "dial_timeout is given 2 times"},
		{"redis+cluster://127.0.0.1:1?pool_timeout=1s&pool_timeout=-1s", "pool_timeout is given 2 times"},
		// prefix= and scripts= were read before the check: the first used.
		{"redis://127.0.0.1:1/0?prefix=a&prefix=b", "prefix is given 2 times"},
		{"redis://127.0.0.1:1/0?scripts=eval&scripts=functions", "scripts is given 2 times"},
		// go-redis panicked on these for a failover client.
		{"redis+sentinel://127.0.0.1:1/m?route_randomly=true", "route_randomly"},
		{"redis+sentinel://127.0.0.1:1/m?route_by_latency=true", "route_by_latency"},
		{"redis+sentinel://127.0.0.1:1/m?master_name=other", "master_name"},
	} {
		t.Run(tc.url, func(t *testing.T) { drivertest.WantInvalidURL(t, tc.url, "", tc.want) })
	}
}

// A database the server does not have was an untyped connect error.
func TestMissingDBIsInvalidURL(t *testing.T) {
	srv := testserver.Redis(t)
	drivertest.WantInvalidURL(t, "redis://"+srv.Addr()+"/99999", "", "db")
}
