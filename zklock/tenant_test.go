package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// TestACLDigestWithPlus: acl=digest:ops:HASH:rd written as the package doc
// shows it, with a HASH that holds '+', grants ops what it says: the '+'
// is not read as a space (which would name an identity nobody has), and
// ops may read the holder's lock node and force-unlock it.
func TestACLDigestWithPlus(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	var pw, hash string
	for i := 0; !strings.Contains(hash, "+"); i++ {
		pw = fmt.Sprintf("ops-pw-%d", i)
		hash = testserver.ZooKeeperDigest("ops", pw)
	}
	base := "@" + srv.Addr() + "/app-a?session_timeout=2s&acl=digest:ops:" + hash + ":rd"
	a := drivertest.MustOpen(t, "zk://a:pa"+base)
	ops := drivertest.MustOpen(t, "zk://ops:"+pw+base)
	la, err := a.Mutex("plus/x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var zl *zklock.Lease
	if !la.As(&zl) {
		t.Fatal("no ZooKeeper lease")
	}
	raw := rawAs(t, srv.Addr(), "ops:"+pw)
	if _, _, err := raw.Get(zl.Path); err != nil {
		t.Fatalf("ops reads a's node: %v; want the acl entry to grant r", err)
	}
	if err := ops.ForceUnlock(ctx, "plus/x"); err != nil {
		t.Fatalf("ForceUnlock by ops: %v", err)
	}
	select {
	case <-la.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a's lease still live 10s after ops' force unlock")
	}
	for _, acl := range []string{"digest:ops:" + strings.ReplaceAll(hash, "+", " ") + ":rd", "digest:ops:notahash:rd", "world:someone:r", "ip:10.0.0.300:r"} {
		if _, err := dlock.Open(ctx, "zk://"+srv.Addr()+"/?acl="+strings.ReplaceAll(acl, " ", "%20")); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("acl=%s: %v; want ErrInvalidURL", acl, err)
		}
	}
}

// rawAs returns a go-zookeeper connection authenticated with digest auth.
func rawAs(t *testing.T, addr, auth string) *zk.Conn {
	t.Helper()
	raw, _, err := zk.Connect([]string{addr}, 2*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(raw.Close)
	if err := raw.AddAuth("digest", []byte(auth)); err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestTenantAttacks: tenants a and b set up as the package doc says (a
// digest identity and a chroot each). Through go-zookeeper, b's identity
// cannot list or read a's lock names or data, take (create a contender),
// release (delete the holder's node) or wake a's waiter (create or delete
// nodes under a's lock), and cannot keep a's lease alive (a session is its
// client's alone). The limits docs/security.md lists stay: b can test
// whether a path it guesses exists (exists needs no permission).
func TestTenantAttacks(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	a := drivertest.MustOpen(t, "zk://a:pa@"+srv.Addr()+"/app-a?session_timeout=2s")
	drivertest.MustOpen(t, "zk://b:pb@"+srv.Addr()+"/app-b?session_timeout=2s")
	const name = "tenantA/secret"
	la, err := a.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	var zl *zklock.Lease
	if !la.As(&zl) {
		t.Fatal("no ZooKeeper lease")
	}
	b := rawAs(t, srv.Addr(), "b:pb")
	noAuth := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("%s as b: %v; want ErrNoAuth", what, err)
		}
	}
	_, _, err = b.Children("/app-a")
	noAuth("read names: list /app-a", err)
	_, _, err = b.Children("/app-a/" + name)
	noAuth("read names: list the lock's contenders", err)
	_, _, err = b.Get(zl.Path)
	noAuth("read names: read the holder's node", err)
	_, err = b.Create("/app-a/"+name+"/_c_b-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	noAuth("take: a contender under a's lock", err)
	noAuth("release: delete the holder's node", b.Delete(zl.Path, -1))
	_, err = b.Create("/app-a/"+name+"/_c_b-wake", nil, 0, zk.WorldACL(zk.PermAll))
	noAuth("wake waiters: a node under a's lock", err)
	_, err = b.Set("/app-a/"+name, []byte("x"), -1)
	noAuth("write a's lock node", err)
	if ok, _, err := b.Exists("/app-a/" + name); err != nil || !ok { // the documented limit
		t.Errorf("exists of a guessed name as b: %v %v; docs/security.md says ZooKeeper answers it", ok, err)
	}
	drivertest.WantKept(t, a, la, name, 2*time.Second)
}

// TestChrootNotSquatted: a tenant's chroot cannot be taken over by another
// tenant. Made before the tenant's first Open, open to all, Open refuses
// it (another tenant pre-created a lock node there and released a's
// holder). Made by a's Open, it is persistent and never empty, so another
// client cannot delete it and make it again: the server removed the empty
// container a chroot was, and b made it again, open (an adversary pass).
func TestChrootNotSquatted(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	b := rawAs(t, srv.Addr(), "b:pb")
	if _, err := b.Create("/squatted", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, err := dlock.Open(ctx, "zk://a:pa@"+srv.Addr()+"/squatted?session_timeout=2s")
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "world:anyone") {
		t.Fatalf("Open on a chroot open to all: %v; want ErrInvalidConfig naming world:anyone", err)
	}
	// Made by b for a and b both, or open to all but unreadable.
	both := []zk.ACL{{Perms: zk.PermAll, Scheme: "digest", ID: "b:" + testserver.ZooKeeperDigest("b", "pb")},
		{Perms: zk.PermAll, Scheme: "digest", ID: "a:" + testserver.ZooKeeperDigest("a", "pa")}}
	if _, err := b.Create("/shared", nil, 0, both); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("/blind", nil, 0, zk.WorldACL(zk.PermCreate|zk.PermDelete|zk.PermWrite)); err != nil {
		t.Fatal(err)
	}
	// The re-test pass's shapes: a named without delete, rights by
	// address, re-ACL open to anyone while a may not create yet, names
	// readable by anyone.
	for path, acl := range map[string][]zk.ACL{
		"/nodelete":  {both[0], {Perms: zk.PermCreate | zk.PermRead, Scheme: "digest", ID: both[1].ID}},
		"/byaddress": {{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"}},
		"/reacl":     zk.WorldACL(zk.PermAdmin),
		"/readable":  {both[1], {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}},
	} {
		if _, err := b.Create(path, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	// Two passwords of a's user: anyone may authenticate as either.
	impostor := []zk.ACL{both[1], {Perms: zk.PermAll, Scheme: "digest", ID: "a:" + testserver.ZooKeeperDigest("a", "evil")}}
	if _, err := b.Create("/impostor", nil, 0, impostor); err != nil {
		t.Fatal(err)
	}
	for chroot, want := range map[string]string{"/impostor": `digest user "a" twice`, "/shared": "digest:b:", "/blind": "not read its ACL",
		"/nodelete": "digest:b:", "/byaddress": "ip:127.0.0.1", "/reacl": "world:anyone", "/readable": "world:anyone"} {
		_, err = dlock.Open(ctx, "zk://a:pa@"+srv.Addr()+chroot+"?session_timeout=2s")
		if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open on %s: %v; want ErrInvalidConfig saying %q", chroot, err, want)
		}
	}

	// A tenant known by its address (no URL user) is a tenant, not the
	// superuser, whose looser rule trusted b's entry (a re-test pass).
	if _, err := b.Create("/byip", nil, 0, []zk.ACL{{Perms: zk.PermAll, Scheme: "ip", ID: "127.0.0.1"}, both[0]}); err != nil {
		t.Fatal(err)
	}
	_, err = dlock.Open(ctx, "zk://"+srv.Addr()+"/byip?session_timeout=2s&acl=ip:127.0.0.1:cdrwa")
	if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "digest:b:…") {
		t.Errorf("Open of an address's tenant on a chroot b may change: %v; want ErrInvalidConfig naming digest:b:…", err)
	}
	// The URL's own user again in acl= is one password, not two.
	self := drivertest.MustOpen(t, "zk://a:pa@"+srv.Addr()+"/self?session_timeout=2s&acl=digest:"+both[1].ID+":r")
	if l, err := self.Mutex("x").Lock(ctx); err != nil {
		t.Errorf("lock with a's own entry in acl=: %v", err)
	} else if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	a := drivertest.MustOpen(t, "zk://a:pa@"+srv.Addr()+"/mine?session_timeout=2s")
	l, err := a.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, st, err := b.Exists("/mine"); err != nil || st == nil || st.EphemeralOwner != 0 {
		t.Fatalf("chroot: %v %+v; want it persistent", err, st)
	}
	if err := b.Delete("/mine", -1); !errors.Is(err, zk.ErrNotEmpty) {
		t.Fatalf("b deletes a's chroot: %v; want ErrNotEmpty", err)
	}
	if _, err := a.Mutex(zklock.ChrootMarker).TryLock(ctx); !errors.Is(err, dlock.ErrInvalidName) {
		t.Errorf("a lock named as the chroot's marker: %v; want ErrInvalidName", err)
	}
}

// TestLockNodeNotSquatted: another identity made the chroot first, left a
// lock's node in it (or a node of a name with slashes, or a semaphore's
// leases node) open to all, then narrowed the chroot's ACL to a's. Open
// passes (the chroot's own ACL is a's alone), but a's first lock under such
// a node is refused with ErrInvalidConfig naming it, before a makes a
// contender there that the other identity could delete (a re-test pass
// took a's lock so). So is a's first lock in a chroot b granted it rights
// in after a's Open. Under the chroot's other names a locks as before.
func TestLockNodeNotSquatted(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := t.Context()
	b := rawAs(t, srv.Addr(), "b:pb")
	entry := func(user, pw string) zk.ACL {
		return zk.ACL{Perms: zk.PermAll, Scheme: "digest", ID: user + ":" + testserver.ZooKeeperDigest(user, pw)}
	}
	open := zk.WorldACL(zk.PermAll)
	for _, n := range []struct {
		path string
		acl  []zk.ACL
	}{
		{"/sq", []zk.ACL{entry("b", "pb")}},
		{"/sq/x", open},          // a lock's node
		{"/sq/orders", open},     // the parent of "orders/secret"
		{"/sq/sem", open},        // a semaphore's node, made a's below…
		{"/sq/sem/leases", open}, // …but its leases' node open
		{"/sq/rw", []zk.ACL{entry("a", "pa"), entry("b", "pb")}}, // b may delete a's readers
		// a may read ro, b may do all: once a's ro/y is empty, b deletes
		// it and makes it again open to all (the second re-test pass).
		{"/sq/ro", open},
		{"/sq/ro/y", []zk.ACL{entry("a", "pa")}},
	} {
		if _, err := b.Create(n.path, nil, 0, n.acl); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.SetACL("/sq/ro", []zk.ACL{entry("b", "pb"), {Perms: zk.PermRead, Scheme: "digest", ID: entry("a", "pa").ID}}, -1); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"/sq/sem", "/sq"} {
		if _, err := b.SetACL(node, []zk.ACL{entry("a", "pa")}, -1); err != nil {
			t.Fatal(err)
		}
	}
	a := drivertest.MustOpen(t, "zk://a:pa@"+srv.Addr()+"/sq?session_timeout=2s")
	rawA := rawAs(t, srv.Addr(), "a:pa")
	// refused wants err to name node, and nothing made in empty.
	refused := func(what, node string, err error, empty ...string) {
		t.Helper()
		if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), node) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming %s", what, err, node)
		}
		for _, n := range append(empty, node)[:1] {
			if kids, _, err := rawA.Children(n); err != nil || len(kids) != 0 {
				t.Errorf("%s: children of %s %v (%v); want none", what, n, kids, err)
			}
		}
	}
	_, err := a.Mutex("x").TryLock(ctx)
	refused("lock x", "/sq/x", err)
	_, err = a.Mutex("orders/secret").TryLock(ctx)
	refused("lock orders/secret", "/sq/orders", err)
	_, err = a.Semaphore("sem", 2).TryAcquire(ctx)
	refused("semaphore sem", "/sq/sem/leases", err)
	_, err = a.RWMutex("rw").TryRLock(ctx)
	refused("read lock rw", "/sq/rw", err)
	for range 2 { // refused again: a refused lock leaves nothing passed
		_, err = a.Mutex("ro/y").TryLock(ctx)
		refused("lock ro/y", "/sq/ro", err, "/sq/ro/y")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second) // the old code waited here for its own lock on x
	defer cancel()
	_, err = a.Election("x").Campaign(cctx, "v")
	refused("campaign x", "/sq/x", err)

	// A chroot a could not create in at Open (b's alone), where b then
	// grants a rights and leaves a lock's node open: a's lock is refused,
	// naming the chroot b still controls.
	if _, err := b.Create("/granted", nil, 0, []zk.ACL{entry("b", "pb")}); err != nil {
		t.Fatal(err)
	}
	late := drivertest.MustOpen(t, "zk://a:pa@"+srv.Addr()+"/granted?session_timeout=2s")
	if _, err := b.Create("/granted/x", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetACL("/granted", []zk.ACL{entry("b", "pb"), entry("a", "pa")}, -1); err != nil {
		t.Fatal(err)
	}
	_, err = late.Mutex("x").TryLock(ctx)
	refused("lock x in a chroot granted after Open", "/granted", err, "/granted/x")

	// A second password of a's user, on a node a may only read: ZooKeeper
	// hides the digest from a (a:x), and a hidden digest is not a's.
	evil := zk.ACL{Perms: zk.PermAll, Scheme: "digest", ID: "a:" + testserver.ZooKeeperDigest("a", "evil")}
	if _, err := b.Create("/hidden", nil, 0, open); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create("/hidden/x", nil, 0, []zk.ACL{evil, {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}); err != nil {
		t.Fatal(err)
	}
	// Whoever has the second password leaves x/y to a, to swap it later.
	if _, err := rawAs(t, srv.Addr(), "a:evil").Create("/hidden/x/y", nil, 0, []zk.ACL{entry("a", "pa")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetACL("/hidden", []zk.ACL{entry("a", "pa"), {Perms: zk.PermRead, Scheme: "world", ID: "anyone"}}, -1); err != nil {
		t.Fatal(err)
	}
	hidden := drivertest.MustOpen(t, "zk://a:pa@"+srv.Addr()+"/hidden?session_timeout=2s&acl=world:anyone:r")
	_, err = hidden.Mutex("x/y").TryLock(ctx)
	refused("lock under a hidden second password", "/hidden/x", err, "/hidden/x/y")
	if err != nil && !strings.Contains(err.Error(), "hides its digest") {
		t.Errorf("lock under a hidden second password: %v; want it to say the digest is hidden", err)
	}

	l, err := a.Mutex("mine/y").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Children("/sq/mine"); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("b lists a's own node: %v; want ErrNoAuth", err)
	}
}
