package redislock_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// What go-redis logs while running dlock's commands (here: failed dials to
// a server that went away) goes to the dlock client's logger, not to
// stderr.
func TestGoRedisLogsGoToTheClientsLogger(t *testing.T) {
	var c *dlock.Client
	logs := logsAfterKill(t, func(addr string, logger *slog.Logger) error {
		var err error
		c, err = dlock.Open(t.Context(), "redis://"+addr+"?dial_timeout=200ms", dlock.WithLogger(logger))
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		return err
	}, func(ctx context.Context) {
		if _, err := c.Mutex("logs").TryLock(ctx); err == nil {
			t.Fatal("TryLock succeeded with the server gone")
		}
	})
	if !strings.Contains(logs, "go-redis") || !strings.Contains(logs, "dial") {
		t.Fatalf("the client's logger got no go-redis line about the failed dial:\n%s", logs)
	}
}

// A caller's own go-redis client is left as it is: dlock adds no hook to
// its commands, so what go-redis logs about the application's own commands
// does not go to the dlock client's logger.
func TestOwnClientsLogsAreLeftAlone(t *testing.T) {
	var rdb *redis.Client
	logs := logsAfterKill(t, func(addr string, logger *slog.Logger) error {
		rdb = redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1,
			ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		c, err := redislock.Open(t.Context(), rdb, redislock.Options{Logger: logger})
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
		}
		return err
	}, func(ctx context.Context) {
		for range 3 { // the application's own commands, failing to dial
			if err := rdb.Ping(ctx).Err(); err == nil {
				t.Fatal("Ping succeeded with the server gone")
			}
		}
	})
	if strings.Contains(logs, "go-redis") {
		t.Fatalf("the dlock client's logger got go-redis's lines about the application's own commands:\n%s", logs)
	}
}

// logsAfterKill opens a dlock client on a Redis server with open, which
// logs to the logger it is given; kills the server; runs fail, which makes
// commands that cannot reach it; and returns what the logger got.
func logsAfterKill(t *testing.T, open func(addr string, logger *slog.Logger) error, fail func(ctx context.Context)) string {
	t.Helper()
	srv := testserver.Redis(t)
	var buf syncBuffer
	if err := open(srv.Addr(), slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	fail(ctx)
	return buf.String()
}
