package redislock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// TestListUnderTenantACL: with exactly the package doc's grant, each
// tenant lists its own locks of every kind, and nothing of the other's
// (no SCAN, which ignores key patterns: the doc does not grant it); a
// missing right is a configuration error that names it.
func TestListUnderTenantACL(t *testing.T) {
	srv, a, b := tenants(t)
	ctx := t.Context()
	if _, err := a.Mutex("secret-customer-42").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Semaphore("secret-customer-42", 2).Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RWMutex("b-job").RLock(ctx); err != nil {
		t.Fatal(err)
	}
	names := func(c *dlock.Client) []string {
		infos, err := c.List(ctx, "")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var out []string
		for _, i := range infos {
			out = append(out, i.Name+" "+i.Kind.String())
		}
		return out
	}
	if got := strings.Join(names(a), ","); got != "secret-customer-42 exclusive,secret-customer-42 permit" {
		t.Errorf("a lists %q", got)
	}
	if got := strings.Join(names(b), ","); got != "b-job shared" {
		t.Errorf("b lists %q, want only its own", got)
	}
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "tb", Password: "pb"})
	defer raw.Close()
	if err := raw.ZRange(ctx, "a:index", 0, -1).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("b's user reading a's index: %v; want NOPERM", err)
	}

	setUser(t, srv, append(docGrant(t, "nolist", "pw", "a"), "-zrange")...)
	c := drivertest.MustOpen(t, "redis://nolist:pw@"+srv.Addr()+"?prefix=a")
	if _, err := c.List(ctx, ""); err == nil || !errors.Is(err, dlock.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "missing ACL permission for command ZRANGE") {
		t.Errorf("List without ZRANGE: %v; want a configuration error naming it", err)
	}
}

// TestListPrunesIndex: List drops from the index a lock that is free and
// was last added long ago, and keeps one that is held however old its
// entry.
func TestListPrunesIndex(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	c := drivertest.MustOpen(t, "redis://"+srv.Addr()+"?prefix=p")
	if _, err := c.Mutex("held").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex("free").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	old := float64(time.Now().Add(-2 * time.Hour).UnixMilli())
	if err := admin.ZAdd(ctx, "p:index", redis.Z{Score: old, Member: "m:held"}, redis.Z{Score: old, Member: "m:free"}).Err(); err != nil {
		t.Fatal(err)
	}
	infos, err := c.List(ctx, "")
	if err != nil || len(infos) != 1 || infos[0].Name != "held" {
		t.Fatalf("List: %+v, %v; want held alone", infos, err)
	}
	members, err := admin.ZRange(ctx, "p:index", 0, -1).Result()
	if err != nil || strings.Join(members, ",") != "m:held" {
		t.Fatalf("index after List: %q, %v; want the free lock dropped, the held one kept", members, err)
	}
}
