package zklock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// aclHarness opens clients authenticated as user, whose nodes carry the
// creator-only digest ACL a zk://user:pw@… URL gives them.
type aclHarness struct {
	harness
	user, pw string
}

func (h *aclHarness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	conn, events, err := connect(h.addr, cu.DialTimeout)
	if err != nil {
		return nil, err
	}
	if err := conn.AddAuth("digest", []byte(h.user+":"+h.pw)); err != nil {
		conn.Close()
		return nil, err
	}
	c, err := zklock.Open(ctx, conn, zklock.Options{SessionTimeout: sessionTimeout, Events: events, CloseConn: true,
		ACL: zk.DigestACL(zk.PermAll, h.user, h.pw)})
	if err != nil {
		conn.Close()
		return nil, err
	}
	h.Track(c, cu)
	return c, nil
}

// LeastPrivilege gives the suite clients of a digest identity whose nodes
// only it may touch, beside nodes of another identity that it cannot
// (drivertest.ACLHarness).
func (h *harness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	return &aclHarness{harness: harness{addr: h.addr}, user: "worker", pw: "worker-pw"}, nil
}

// TestTenantsApart: tenant a's locks, under /app-a, carry a's ACL plus read
// and delete for an operator. b's identity can neither take, queue for,
// release, force-release nor overwrite them, and fails at once with an
// error naming the node; a's holder keeps its lease. The operator (acl
// entry rd) may force-unlock but not lock, as may ZooKeeper's superuser.
func TestTenantsApart(t *testing.T) {
	srv := testserver.ZooKeeperSuper(t, "super", "super-pw")
	ctx := t.Context()
	opsACL := "digest:ops:" + testserver.ZooKeeperDigest("ops", "ops-pw") + ":rd"
	base := "@" + srv.Addr() + "/app-a?session_timeout=2s&acl=" + url.QueryEscape(opsACL)
	a := drivertest.MustOpen(t, "zk://a:pa"+base)
	b := drivertest.MustOpen(t, "zk://b:pb"+base)
	ops := drivertest.MustOpen(t, "zk://ops:ops-pw"+base)
	super := drivertest.MustOpen(t, "zk://super:super-pw"+base)

	const name = "tenant/x"
	la, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(op string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "missing ACL permission on /app-a/tenant/x") || !errors.Is(err, dlock.ErrInvalidConfig) {
			t.Errorf("%s by b on a's lock: %v; want a missing ACL permission named", op, err)
		}
	}
	_, err = b.Mutex(name).TryLock(ctx)
	refused("TryLock", err)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	_, err = b.Mutex(name).Lock(wctx)
	refused("Lock", err)
	if wctx.Err() != nil {
		t.Errorf("b's Lock waited out its ctx")
	}
	cancel()
	_, err = ops.Mutex(name).TryLock(ctx) // read and delete only
	refused("TryLock by the operator", err)
	refused("ForceUnlock", b.ForceUnlock(ctx, name))
	var zl *zklock.Lease
	if !la.As(&zl) {
		t.Fatal("no ZooKeeper lease")
	}
	raw, _, err := zk.Connect([]string{srv.Addr()}, 2*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.AddAuth("digest", []byte("b:pb")); err != nil {
		t.Fatal(err)
	}
	if err := raw.Delete(zl.Path, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("delete of a's node by b: %v; want ErrNoAuth", err)
	}
	if _, err := raw.Set("/app-a/"+name, []byte("b"), -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("write of a's lock node by b: %v; want ErrNoAuth", err)
	}
	if _, err := raw.Create("/app-a/"+name+"/_c_b-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("a contender's node under a's lock by b: %v; want ErrNoAuth", err)
	}
	drivertest.WantKept(t, a, la, name, 2*time.Second)

	if err := ops.ForceUnlock(ctx, name); err != nil {
		t.Fatalf("ForceUnlock by the operator (acl rd): %v", err)
	}
	select {
	case <-la.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a's lease still live 10s after the operator's force unlock")
	}
	l2, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := super.ForceUnlock(ctx, name); err != nil {
		t.Fatalf("ForceUnlock by the superuser: %v", err)
	}
	select {
	case <-l2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a's lease still live 10s after the superuser's force unlock")
	}
}

// TestACLParamRefused: a malformed acl parameter is refused before dialing.
func TestACLParamRefused(t *testing.T) {
	for _, acl := range []string{"digest", "digest:ops", "digest:ops:h:", "digest:ops:h:x", ":id:r"} {
		_, err := dlock.Open(t.Context(), "zk://127.0.0.1:1/?acl="+url.QueryEscape(acl))
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("acl=%s: %v; want ErrInvalidURL", acl, err)
		}
	}
	// A '&' for the '?': the parameters became the chroot (a re-test pass).
	if _, err := dlock.Open(t.Context(), "zk://127.0.0.1:1/c&acl="+url.QueryEscape("digest:ops:h:rd")); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("zk://…/c&acl=…: %v; want ErrInvalidURL", err)
	}
	// A key written escaped is the key url.Values reads: the entry was
	// dropped without a word (a re-test pass).
	_, err := dlock.Open(t.Context(), "zk://127.0.0.1:1/?ac%6C="+url.QueryEscape("digest:ops:h:x"))
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("ac%%6C=digest:ops:h:x: %v; want ErrInvalidURL", err)
	}
}
