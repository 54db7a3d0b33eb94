package redislock_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestTenantAttacks: tenants a and b set up exactly as the package doc
// says (the worker grant with prefixes a and b, the library loaded by the
// operator). Through go-redis, with b's user, every way docs/security.md
// lists to read a's names, take, release or keep alive a's lock, stall the
// server or wake a's waiters is refused with NOPERM, and a's holder and
// waiter are untouched: the holder keeps its lease and token, the waiter
// still waits.
func TestTenantAttacks(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	setUser(t, srv, docGrant(t, "ta", "pa", "a")...)
	setUser(t, srv, docGrant(t, "tb", "pb", "b")...)
	const name = "tenantA/secret-customer-42"
	a, la := drivertest.MustHoldAs(t, "redis://ta:pa@"+srv.Addr()+"?prefix=a", name, 10*time.Second)
	// A waiter of a's, queued behind the holder: nothing b does may wake it.
	waiter := drivertest.StartWaiter(t, a.Mutex(name))
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	lock, queue := "a:{"+name+"}", "a:{"+name+"}:queue"
	for admin.LLen(ctx, queue).Val() == 0 { // the waiter has queued
		if ok, err := waiter.Returned(); ok {
			t.Fatalf("a's waiter: %v", err)
		}
		time.Sleep(5 * time.Millisecond) // polling the store: no channel says it
	}
	libName, _ := redisnode.Library()
	fn := func(f string) string { return libName + "_" + f }

	b := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "tb", Password: "pb"})
	defer b.Close()
	keys4 := []any{4, lock, lock + ":token", queue, lock + ":queueinfo"}
	for _, tc := range []struct {
		what string
		cmd  []any
	}{
		{"read names", []any{"KEYS", "*"}},
		{"read names", []any{"SCAN", 0, "MATCH", "a:*"}},
		{"read names", []any{"HGETALL", lock}},
		{"read names", []any{"PSUBSCRIBE", "a:*"}},
		{"read names", []any{"FUNCTION", "LIST"}},
		{"take", append([]any{"FCALL", fn("acquire")}, append(keys4, "intruder", 10000, "req-b", "", "", "")...)},
		{"take", []any{"HSET", lock, "intruder", 1}},
		{"release", []any{"DEL", lock}},
		{"release", append([]any{"FCALL", fn("force")}, keys4...)},
		{"keep alive", []any{"PEXPIRE", lock, 3600000}},
		{"keep alive", []any{"FCALL", fn("renew"), 1, lock, la.Owner(), la.Token(), 3600000}},
		{"stall server", []any{"EVAL", "while true do end", 0}},
		{"stall server", []any{"SCRIPT", "LOAD", "while true do end"}},
		{"stall server", []any{"FUNCTION", "LOAD", "#!lua name=spin\nredis.register_function('spin', function() while true do end end)"}},
		{"stall server", []any{"FUNCTION", "FLUSH"}},
		{"stall server", []any{"CLIENT", "PAUSE", 10000}},
		{"stall server", []any{"CLIENT", "KILL", "USER", "ta"}},
		{"wake waiters", []any{"PUBLISH", lock + ":released", "r"}},
		{"wake waiters", []any{"PUBLISH", "a:handoffs:x", "h1 1"}},
		{"wake waiters", append([]any{"FCALL", fn("cancel")}, append(keys4, "req-b", la.Owner())...)},
	} {
		err := b.Do(ctx, tc.cmd...).Err()
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s: %v as b: %v; want NOPERM", tc.what, tc.cmd[:2], err)
		}
	}
	drivertest.WantKept(t, a, la, name, 10*time.Second)
	waiter.Stop(t)
}

// TestNestedPrefixRefused: a prefix holding the separator would sit inside
// another tenant's ACL pattern (~a:* covers a:b:{name}); Open refuses it.
func TestNestedPrefixRefused(t *testing.T) {
	srv := testserver.Redis(t)
	for _, p := range []string{"a:b", "a*", "a{x}"} {
		c, err := dlock.Open(t.Context(), "redis://"+srv.Addr()+"?prefix="+url.QueryEscape(p))
		if err == nil {
			c.Close()
			t.Fatalf("prefix %q accepted", p)
		}
		if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "must not nest") {
			t.Fatalf("prefix %q: %v; want ErrInvalidConfig saying prefixes must not nest", p, err)
		}
	}
}
