package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// docGrant returns the ACL SETUSER line of the package doc's "Least
// privilege" section, so the tests grant exactly what the doc tells users
// to, for user name with password pw and key prefix prefix.
func docGrant(t *testing.T, name, pw, prefix string) []any {
	t.Helper()
	l := drivertest.DocLines(t, "doc.go", "", "ACL SETUSER ")[0]
	l = strings.NewReplacer("ACL SETUSER ", "", "dlock-worker", name, "PASSWORD", pw, "dlock:*", prefix+":*").Replace(l)
	var args []any
	for _, f := range strings.Fields(l) {
		args = append(args, f)
	}
	return args
}

// setUser runs ACL SETUSER on srv as the default (unrestricted) user, and
// loads dlock's function library as that user (dlock migrate), as the
// package doc tells operators: workers may call the functions, not load
// them.
func setUser(t *testing.T, srv *testserver.Server, args ...any) {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.Do(t.Context(), append([]any{"ACL", "SETUSER"}, args...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %v: %v", args, err)
	}
	c, err := dlock.Open(t.Context(), "redis://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate as the default user: %v", err)
	}
}

// LeastPrivilege gives the suite clients of a user with exactly the package
// doc's grant and nothing more (drivertest.ACLHarness).
func (h singleHarness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	srv := testserver.Redis(t)
	setUser(t, srv, docGrant(t, "worker", "worker-pw", "dlock")...)
	lh := &harness{t: t}
	lh.newRDB = func(dial func(context.Context, string, string) (net.Conn, error)) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "worker", Password: "worker-pw",
			Dialer: dial, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	lh.admin = lh.newRDB(nil)
	t.Cleanup(func() { _ = lh.admin.Close() })
	return lh, nil
}

// TestMissingRight: a command or key the ACL refuses fails Lock at once,
// with an error that names it, not a wait until ctx ends.
func TestMissingRight(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		revoke []any
		want   string
	}{
		{"command", []any{"-fcall"}, "missing ACL permission for command FCALL"},
		{"script command", []any{"-incr"}, "missing ACL permission for a command dlock's Lua scripts call"},
		{"keys", []any{"resetkeys", "~other:*"}, "missing ACL permission for keys dlock:*"},
		{"channels", []any{"resetchannels", "&other:*"}, "missing ACL permission for channels dlock:*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setUser(t, srv, append(docGrant(t, "short", "pw", "dlock"), tc.revoke...)...)
			c, err := dlock.Open(ctx, "redis://short:pw@"+srv.Addr())
			if tc.name == "channels" { // Open tells: waiters would never hear of a release
				if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, dlock.ErrInvalidConfig) {
					t.Fatalf("Open: %v; want an error naming %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			drivertest.WantLockRefused(t, c, "acl/"+tc.name, tc.want)
		})
	}
}

// tenants starts a Redis with users ta (password pa) and tb (pb) given the
// package doc's grant for prefixes a and b, and opens a client as each.
func tenants(t *testing.T) (srv *testserver.Server, a, b *dlock.Client) {
	t.Helper()
	srv = testserver.Redis(t)
	setUser(t, srv, docGrant(t, "ta", "pa", "a")...)
	setUser(t, srv, docGrant(t, "tb", "pb", "b")...)
	a = drivertest.MustOpen(t, "redis://ta:pa@"+srv.Addr()+"?prefix=a")
	b = drivertest.MustOpen(t, "redis://tb:pb@"+srv.Addr()+"?prefix=b")
	return srv, a, b
}

// TestTenantsApart: users with the grant for prefixes a and b. The b user
// cannot take, renew, release, force-release or inspect a's locks, and a's
// holder keeps its lease; each tenant locks the same name in its own prefix.
func TestTenantsApart(t *testing.T) {
	srv, a, b := tenants(t)
	ctx := t.Context()
	// b's account with a's prefix: Open finds a's channels refused.
	if _, err := dlock.Open(ctx, "redis://tb:pb@"+srv.Addr()+"?prefix=a"); err == nil ||
		!strings.Contains(err.Error(), "missing ACL permission for channels a:*") {
		t.Errorf("Open of a's prefix by b's user: %v; want a's channels named", err)
	}
	// Even with a's channels added, a's keys stay refused.
	setUser(t, srv, "tb", "&a:*")
	intruder := drivertest.MustOpen(t, "redis://tb:pb@"+srv.Addr()+"?prefix=a")

	const name = "tenant/x"
	la, err := a.Mutex(name, dlock.WithTTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	refused := func(op string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "missing ACL permission for keys a:*") {
			t.Errorf("%s by b's user on a's lock: %v; want a missing permission for a's keys", op, err)
		}
	}
	_, err = intruder.Mutex(name).TryLock(ctx)
	refused("TryLock", err)
	_, err = intruder.Mutex(name, dlock.WithOwner(la.Owner())).TryLock(ctx) // a's owner id: would re-enter
	refused("TryLock as a's owner", err)
	refused("ForceUnlock", intruder.ForceUnlock(ctx, name))
	_, err = intruder.Inspect(ctx, name)
	refused("Inspect", err)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "tb", Password: "pb"})
	defer raw.Close()
	for _, cmd := range [][]any{{"DEL", "a:{" + name + "}"}, {"PEXPIRE", "a:{" + name + "}", 1}, {"HSET", "a:{" + name + "}", "me", 1}} {
		if err := raw.Do(ctx, cmd...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v by b's user: %v; want NOPERM", cmd, err)
		}
	}
	drivertest.WantKept(t, a, la, name, 5*time.Second)
	lb, err := b.Mutex(name).TryLock(ctx) // the same name in b's prefix is b's own
	if err != nil {
		t.Fatalf("b's own lock %s: %v", name, err)
	}
	if err := b.ForceUnlock(ctx, name); err != nil { // b may force-release its own prefix's locks
		t.Fatal(err)
	}
	_ = lb.Unlock(ctx)
}

// TestClusterGrant: a Cluster client of a user with the package doc's two
// lines locks and unlocks on every node, and no command of it is refused
// (ACL LOG stays empty): without +command go-redis asked for COMMAND on
// every request, refused each time (an adversary pass).
func TestClusterGrant(t *testing.T) {
	nodes := testserver.RedisCluster(t, 3)
	lines := drivertest.DocLines(t, "doc.go", "", "ACL SETUSER ")
	if len(lines) < 2 {
		t.Fatalf("the doc has %d ACL SETUSER lines; want the worker's and the Cluster's", len(lines))
	}
	cluster := strings.Fields(strings.NewReplacer("ACL SETUSER ", "", "dlock-worker", "worker").Replace(lines[1]))
	var addrs []string
	for _, n := range nodes {
		setUser(t, n, docGrant(t, "worker", "worker-pw", "dlock")...)
		admin := redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer admin.Close()
		args := []any{"ACL", "SETUSER"}
		for _, f := range cluster {
			args = append(args, f)
		}
		if err := admin.Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %v: %v", args, err)
		}
		if err := admin.Do(t.Context(), "ACL", "LOG", "RESET").Err(); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, n.Addr())
	}
	c := drivertest.MustOpen(t, "redis+cluster://worker:worker-pw@"+strings.Join(addrs, ",")+"/")
	for i := range 30 { // names over every node's slots
		l, err := c.Mutex(fmt.Sprintf("grant-%d", i)).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		admin := redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer admin.Close()
		entries, err := admin.Do(t.Context(), "ACL", "LOG").Slice()
		if err != nil {
			t.Fatal(err)
		}
		var refused []any
		for _, e := range entries {
			if m, ok := e.(map[any]any); !ok || m["object"] != "config|get" { // optional, as the doc says: Open's eviction check
				refused = append(refused, e)
			}
		}
		if len(refused) > 0 {
			t.Errorf("node %s refused %d requests of the worker: %v", n.Addr(), len(refused), refused)
		}
	}
}
