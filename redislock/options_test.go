package redislock_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/syncbuf"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// A client built from a URL follows context deadlines and has bounded I/O,
// keeping the timeouts the URL sets.
func TestURLClientsFollowContext(t *testing.T) {
	srv := testserver.Redis(t)
	for _, tc := range []struct {
		url               string
		dial, read, write time.Duration
	}{
		{"redis://" + srv.Addr(), 2 * time.Second, 3 * time.Second, 3 * time.Second},
		{"redis://" + srv.Addr() + "?dial_timeout=100ms&read_timeout=1s", 100 * time.Millisecond, time.Second, time.Second},
	} {
		c, err := dlock.Open(t.Context(), tc.url)
		if err != nil {
			t.Fatal(err)
		}
		var rdb redis.UniversalClient
		if !c.As(&rdb) {
			t.Fatal("As(*redis.UniversalClient) failed")
		}
		o := rdb.(*redis.Client).Options()
		if !o.ContextTimeoutEnabled || o.DialTimeout != tc.dial || o.ReadTimeout != tc.read || o.WriteTimeout != tc.write {
			t.Errorf("%s: ContextTimeoutEnabled %v, dial %v, read %v, write %v; want true, %v, %v, %v", tc.url,
				o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, tc.dial, tc.read, tc.write)
		}
		_ = c.Close()
	}
}

// syncBuffer is a buffer a logger writes while the test reads it.
type syncBuffer = syncbuf.Buffer

// Open warns, through the logger it is given, when the client it is given
// ignores context deadlines, and only then.
func TestOpenWarnsOfClientIgnoringContext(t *testing.T) {
	srv := testserver.Redis(t)
	for _, follows := range []bool{false, true} {
		var buf syncBuffer
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: follows})
		c, err := redislock.Open(t.Context(), rdb, redislock.Options{
			Logger: slog.New(slog.NewTextHandler(&buf, nil)), CloseClient: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
		warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "ContextTimeoutEnabled")
		if warned == follows {
			t.Errorf("ContextTimeoutEnabled %v: warned %v; log: %q", follows, warned, buf.String())
		}
	}
}
