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
	srv := testserver.Redis(t)
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := dlock.Open(t.Context(), "redis://"+srv.Addr()+"?dial_timeout=200ms", dlock.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if _, err := c.Mutex("logs").TryLock(ctx); err == nil {
		t.Fatal("TryLock succeeded with the server gone")
	}
	if !strings.Contains(buf.String(), "go-redis") || !strings.Contains(buf.String(), "dial") {
		t.Fatalf("the client's logger got no go-redis line about the failed dial:\n%s", buf.String())
	}
}

// A caller's own go-redis client is left as it is: dlock adds no hook to
// its commands, so what go-redis logs about the application's own commands
// does not go to the dlock client's logger.
func TestOwnClientsLogsAreLeftAlone(t *testing.T) {
	srv := testserver.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1,
		ContextTimeoutEnabled: true})
	defer rdb.Close()
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := redislock.Open(t.Context(), rdb, redislock.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.Kill()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	for range 3 { // the application's own commands, failing to dial
		if err := rdb.Ping(ctx).Err(); err == nil {
			t.Fatal("Ping succeeded with the server gone")
		}
	}
	if strings.Contains(buf.String(), "go-redis") {
		t.Fatalf("the dlock client's logger got go-redis's lines about the application's own commands:\n%s", buf.String())
	}
}
