package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// scriptCalls returns how many FCALL and EVALSHA calls srv has served.
func scriptCalls(t testing.TB, srv *testserver.Server) (fcall, evalsha int) {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	info, err := admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := func(cmd string) int {
		_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
		if !ok {
			return 0
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		return n
	}
	return calls("fcall"), calls("evalsha")
}

// TestScriptsMode: by default dlock runs its scripts as Redis Functions,
// loading its library on first use (this user may), and sends no EVALSHA;
// with scripts=eval it sends EVALSHA and no FCALL.
func TestScriptsMode(t *testing.T) {
	for _, tc := range []struct {
		query     string
		functions bool
	}{{"", true}, {"?scripts=functions", true}, {"?scripts=eval", false}} {
		t.Run(tc.query, func(t *testing.T) {
			srv := testserver.Redis(t)
			c := drivertest.MustOpen(t, "redis://"+srv.Addr()+tc.query)
			l, err := c.Mutex("scripts/mode").Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
			fcall, evalsha := scriptCalls(t, srv)
			if tc.functions && (fcall < 2 || evalsha != 0) || !tc.functions && (fcall != 0 || evalsha < 2) {
				t.Fatalf("FCALL %d, EVALSHA %d calls; want functions=%v", fcall, evalsha, tc.functions)
			}
		})
	}
	if _, err := dlock.Open(t.Context(), "redis://127.0.0.1:1?scripts=lua"); err == nil || !strings.Contains(err.Error(), "scripts=") {
		t.Fatalf("scripts=lua: %v; want an error naming it", err)
	}
}

// TestFunctionsNotLoaded: a worker with the documented grant, on a server
// where nobody loaded dlock's library, fails at once with a configuration
// error that says what to do, not a wait; after dlock migrate (Migrate as
// the default user), it locks.
func TestFunctionsNotLoaded(t *testing.T) {
	srv := testserver.Redis(t)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.Do(t.Context(), append([]any{"ACL", "SETUSER"}, docGrant(t, "w", "pw", "dlock")...)...).Err(); err != nil {
		t.Fatal(err)
	}
	c := drivertest.MustOpen(t, "redis://w:pw@"+srv.Addr())
	if _, err := c.Mutex("fn/x").Lock(t.Context()); !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "dlock migrate") {
		t.Fatalf("Lock before migrate: %v; want ErrInvalidConfig telling to run dlock migrate", err)
	}
	if err := c.Migrate(t.Context()); !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Fatalf("Migrate as the worker: %v; want ErrInvalidConfig (no +function|load)", err)
	}
	ac := drivertest.MustOpen(t, "redis://"+srv.Addr())
	if err := ac.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate as the default user: %v", err)
	}
	if err := ac.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	l, err := c.Mutex("fn/x").Lock(t.Context())
	if err != nil {
		t.Fatalf("Lock after migrate: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkScripts compares one Lock+Unlock (two script calls) run as
// Redis Functions and with EVALSHA, each on a server of its own. Besides
// the wall time (which on a loaded machine says more about the machine),
// it reports the server's own time per script call from INFO
// commandstats: server-µs/call.
func BenchmarkScripts(b *testing.B) {
	for _, mode := range []struct {
		name, cmd string
		eval      bool
	}{{"functions", "fcall", false}, {"evalsha", "evalsha", true}} {
		b.Run(mode.name, func(b *testing.B) {
			srv := testserver.Redis(b)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
			b.Cleanup(func() { _ = rdb.Close() })
			c, err := redislock.Open(b.Context(), rdb, redislock.Options{Eval: mode.eval})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = c.Close() })
			drivertest.LockUnlock(b, c, "bench/scripts")
			b.StopTimer()
			b.ReportMetric(serverMicros(b, rdb, mode.cmd), "server-µs/call")
		})
	}
}

// serverMicros returns the server's mean time per call of cmd, from INFO
// commandstats.
func serverMicros(b *testing.B, rdb *redis.Client, cmd string) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	_, rest, ok := strings.Cut(info, "cmdstat_"+cmd+":")
	if !ok {
		b.Fatalf("no %s in commandstats", cmd)
	}
	_, rest, _ = strings.Cut(rest, "usec_per_call=")
	v, err := strconv.ParseFloat(rest[:strings.IndexByte(rest, ',')], 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// TestNoFunctionsFallsBack: a server without FCALL and FUNCTION (as before
// Redis 7.0; here they are renamed away) gets the scripts with EVALSHA,
// found out on the first call, and every step of a lock works.
func TestNoFunctionsFallsBack(t *testing.T) {
	srv := testserver.Redis(t, "--rename-command", "FCALL", "", "--rename-command", "FUNCTION", "")
	c := drivertest.MustOpen(t, "redis://"+srv.Addr())
	m := c.Mutex("scripts/old", dlock.WithTTL(3*time.Second))
	l, err := m.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(t.Context(), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fcall, evalsha := scriptCalls(t, srv); fcall != 0 || evalsha < 2 {
		t.Fatalf("FCALL %d, EVALSHA %d calls; want EVALSHA only", fcall, evalsha)
	}
	if err := c.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate on a server without functions: %v", err)
	}
}
