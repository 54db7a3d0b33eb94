package redlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// docGrant returns the arguments of the ACL SETUSER line in the package
// doc, for user name with password pw.
func docGrant(t *testing.T, name, pw string) []any {
	t.Helper()
	l := drivertest.DocLines(t, "redlock.go", "", "ACL SETUSER ")[0]
	var args []any
	for _, f := range strings.Fields(strings.NewReplacer("dlock-worker", name, "PASSWORD", pw).Replace(l)) {
		args = append(args, f)
	}
	return args
}

// aclNodes starts n servers, each with user name made by the doc's grant
// plus extra rules.
func aclNodes(t *testing.T, n int, name, pw string, extra ...any) []string {
	var addrs []string
	for range n {
		s := testserver.Redis(t)
		admin := redis.NewClient(&redis.Options{Addr: s.Addr()})
		err := admin.Do(t.Context(), append(docGrant(t, name, pw), extra...)...).Err()
		_ = admin.Close()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, s.Addr())
	}
	// The operator loads dlock's functions (dlock migrate as the default
	// user), as package redislock's doc says: workers may only call them.
	c, err := dlock.Open(t.Context(), "redlock://"+strings.Join(addrs, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Migrate(t.Context()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return addrs
}

// LeastPrivilege gives the suite clients of 3 nodes as a user with exactly
// the package doc's grant (drivertest.ACLHarness).
func (h *harness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	return &aclHarness{harness{addrs: aclNodes(t, 3, "worker", "worker-pw")}}, nil
}

type aclHarness struct{ harness }

func (h *aclHarness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	cs := make([]redis.UniversalClient, len(h.addrs))
	for i, a := range h.addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a, Username: "worker", Password: "worker-pw", Dialer: cu.Dial, MaxRetries: -1,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	// A generous per-node timeout: this test is about rights, and the machine may be loaded.
	c, err := redlock.Open(ctx, cs, redlock.Options{CloseClients: true, NodeTimeout: 500 * time.Millisecond})
	return h.Opened(c, cu, err, nil)
}

// TestMissingRight: with a right missing on every node, Lock fails at once
// naming it, where it used to read as a lock held by another owner.
func TestMissingRight(t *testing.T) {
	addrs := aclNodes(t, 3, "short", "pw", "-fcall")
	c := drivertest.MustOpen(t, "redlock://short:pw@"+strings.Join(addrs, ","))
	drivertest.WantLockRefused(t, c, "acl/x", "missing ACL permission for command FCALL")
}
