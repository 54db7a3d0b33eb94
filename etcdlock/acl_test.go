package etcdlock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// authEtcd starts an etcd with a root user and authentication enabled, and
// returns its endpoint and a function that gives user name (password pw)
// the package doc's grant over prefix, by running the doc's etcdctl lines.
func authEtcd(t *testing.T) (string, func(name, pw, prefix string)) {
	t.Helper()
	srv := testserver.Etcd(t)
	ep := "http://" + srv.Addr()
	etcdctl := testserver.LookBinary(t, "etcdctl")
	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ctx := t.Context()
	if _, err := root.UserAdd(ctx, "root", "root-pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	lines := drivertest.DocLines(t, "etcdlock.go", "", "etcdctl ")
	return ep, func(name, pw, prefix string) {
		t.Helper()
		for _, l := range lines {
			l = strings.NewReplacer("etcdctl ", "", "dlock-worker", name, "PASSWORD", pw, "app/", prefix).Replace(l)
			cmd := exec.CommandContext(ctx, etcdctl, append([]string{"--endpoints=" + ep, "--user=root:root-pw"}, strings.Fields(l)...)...)
			cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("etcdctl %s: %v: %s", l, err, out)
			}
		}
	}
}

// tenants gives users ta (password pa) the grant over app-a/ and tb (pb)
// the grant over app-b/ on an etcd with authentication, has a's client
// hold name, and returns the endpoint, a's client, a's lease and a
// clientv3 client logged in as b's user; all are let go when t ends.
func tenants(t *testing.T, name string) (ep string, a *dlock.Client, la *dlock.Lease, b *clientv3.Client) {
	t.Helper()
	ep, grant := authEtcd(t)
	grant("ta", "pa", "app-a/")
	grant("tb", "pb", "app-b/")
	a, la = drivertest.MustHoldAs(t, "etcd://ta:pa@"+strings.TrimPrefix(ep, "http://")+"/app-a/", name, 5*time.Second)
	b, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Username: "tb", Password: "pb", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return ep, a, la, b
}

type aclHarness struct {
	harness
	user, pw, prefix string
}

func (h *aclHarness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	cli, err := clientv3.New(clientv3.Config{Endpoints: h.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second, Username: h.user, Password: h.pw,
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(cu.DialAddr)}})
	if err != nil {
		return nil, err
	}
	c, err := etcdlock.Open(ctx, cli, etcdlock.Options{CloseClient: true, Prefix: h.prefix})
	return h.Opened(c, cu, err, func() { _ = cli.Close() })
}

// LeastPrivilege gives the suite clients of a user given exactly the
// package doc's grant, on an etcd with authentication enabled
// (drivertest.ACLHarness).
func (h debianHarness) LeastPrivilege(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
	ep, grant := authEtcd(t)
	grant("worker", "worker-pw", "app/")
	return &aclHarness{harness: harness{endpoints: []string{ep}}, user: "worker", pw: "worker-pw", prefix: "app/"}, nil
}

// TestMissingRight: a user whose role lacks the prefix, or may only read
// it, gets an error naming the permission at once, not a wait.
func TestMissingRight(t *testing.T) {
	ep, grant := authEtcd(t)
	ctx := t.Context()
	host := strings.TrimPrefix(ep, "http://")
	grant("other", "pw", "elsewhere/")
	_, err := dlock.Open(ctx, "etcd://other:pw@"+host+"/app/")
	if err == nil || !strings.Contains(err.Error(), `missing permission: the user's role needs readwrite on the keys with prefix "app/"`) ||
		!strings.Contains(err.Error(), "permission denied") || !errors.Is(err, dlock.ErrInvalidConfig) {
		t.Fatalf("Open outside the user's prefix: %v; want the missing permission named", err)
	}
	_, err = dlock.Open(ctx, "etcd://other:wrong@"+host+"/elsewhere/")
	if err == nil || !strings.Contains(err.Error(), "missing credentials") {
		t.Fatalf("Open with a wrong password: %v; want the credentials named", err)
	}
	_, err = dlock.Open(ctx, "etcd://"+host+"/elsewhere/")
	if err == nil || !strings.Contains(err.Error(), "missing user") {
		t.Fatalf("Open without a user: %v; want the user named", err)
	}

	root, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, Username: "root", Password: "root-pw", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.RoleAdd(ctx, "reader"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.RoleGrantPermission(ctx, "reader", "ro/", clientv3.GetPrefixRangeEnd("ro/"), clientv3.PermissionType(clientv3.PermRead)); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UserAdd(ctx, "reader", "pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.UserGrantRole(ctx, "reader", "reader"); err != nil {
		t.Fatal(err)
	}
	c := drivertest.MustOpen(t, "etcd://reader:pw@"+host+"/ro/")
	drivertest.WantLockRefused(t, c, "x", `readwrite on the keys with prefix "ro/"`)
}

// TestTenantsApart: users with the grant over app-a/ and app-b/. b's user
// cannot take, release, force-release or inspect a's lock, nor delete or
// overwrite its key, and a's holder keeps its lease.
func TestTenantsApart(t *testing.T) {
	const name = "tenant/x"
	ep, a, la, cli := tenants(t, name)
	ctx := t.Context()
	host := strings.TrimPrefix(ep, "http://")
	if _, err := dlock.Open(ctx, "etcd://tb:pb@"+host+"/app-a/"); err == nil || !strings.Contains(err.Error(), "missing permission") {
		t.Errorf("Open of a's prefix by b's user: %v; want a missing permission", err)
	}
	// b's client over a's prefix, bypassing Open's check: every call is refused.
	var el *etcdlock.Lease
	if !la.As(&el) {
		t.Fatal("no etcd lease")
	}
	for what, op := range map[string]clientv3.Op{
		"delete":    clientv3.OpDelete(el.Key),
		"overwrite": clientv3.OpPut(el.Key, "b"),
		"read":      clientv3.OpGet(el.Key),
		"queue":     clientv3.OpPut("app-a/"+name+"/1", "b"),
	} {
		if _, err := cli.Do(ctx, op); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s of a's key by b's user: %v; want permission denied", what, err)
		}
	}
	if _, err := cli.Revoke(ctx, el.LeaseID); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("revoke of a's session lease by b's user: %v; want permission denied", err)
	}
	drivertest.WantKept(t, a, la, name, 5*time.Second)
	b := drivertest.MustOpen(t, "etcd://tb:pb@"+host+"/app-b/")
	lb, err := b.Mutex(name).TryLock(ctx) // the same name under b's prefix is b's own
	if err != nil {
		t.Fatalf("b's own lock: %v", err)
	}
	_ = lb.Unlock(ctx)
}
