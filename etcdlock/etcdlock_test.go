package etcdlock_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func open(t *testing.T, endpoints ...string) *dlock.Client {
	t.Helper()
	cli, err := newClientv3(endpoints, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := etcdlock.Open(t.Context(), cli, etcdlock.Options{CloseClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dlock and `etcdctl lock` exclude each other, both ways.
func TestEtcdctlInterop(t *testing.T) {
	etcdctl := testserver.LookBinary(t, "etcdctl")
	eps := embedded(t)
	c := open(t, eps...)
	ctx := t.Context()
	ep := strings.TrimPrefix(eps[0], "http://")

	// etcdctl holds while its command runs; dlock cannot take the lock.
	cmd := exec.CommandContext(ctx, etcdctl, "--endpoints="+ep, "lock", "interop", "--", "sh", "-c", "echo held; sleep 2")
	cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil || string(buf) != "held\n" {
		t.Fatalf("etcdctl lock did not run its command: %q %v", buf, err)
	}
	if _, err := c.Mutex("interop").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while etcdctl holds: %v; want ErrNotAcquired", err)
	}
	start := time.Now()
	l, err := c.Mutex("interop").Lock(ctx) // waits for etcdctl to finish
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Fatalf("dlock got the lock after %v, while etcdctl should hold it ~2s", waited)
	}
	_ = cmd.Wait()

	// dlock holds; etcdctl lock waits until dlock unlocks.
	var etcdctlRan atomic.Bool
	done := make(chan error, 1)
	go func() {
		cmd := exec.CommandContext(ctx, etcdctl, "--endpoints="+ep, "lock", "interop", "--", "true")
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		err := cmd.Run()
		etcdctlRan.Store(true)
		done <- err
	}()
	time.Sleep(time.Second)
	if etcdctlRan.Load() {
		t.Fatal("etcdctl lock ran while dlock held the lock")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("etcdctl lock: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("etcdctl lock still waiting after dlock unlocked")
	}
}

// A session lease revoked behind the holder's back ends its leases within a
// keepalive interval.
func TestLeaseRevoked(t *testing.T) {
	eps := embedded(t)
	c := open(t, eps...)
	ctx := t.Context()
	const ttl = 3 * time.Second
	l, err := c.Mutex("revoked", dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var el *etcdlock.Lease
	if !l.As(&el) {
		t.Fatal("Lease.As(*etcdlock.Lease) failed")
	}
	admin, err := newClientv3(eps, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Revoke(ctx, el.LeaseID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Fatalf("Err = %v", l.Err())
		}
	case <-time.After(ttl/3 + time.Second):
		t.Fatal("lease live a keepalive interval after its lease was revoked")
	}
	// The client starts a new session for the next lock.
	l2, err := c.Mutex("revoked", dlock.WithTTL(ttl)).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the session was revoked: %v", err)
	}
	_ = l2.Unlock(ctx)
}

// IsOwner guards a write to etcd: it succeeds for the holder and fails once
// the lock has passed to someone else.
func TestIsOwnerGuardsTxn(t *testing.T) {
	eps := embedded(t)
	a, b := open(t, eps...), open(t, eps...)
	ctx := t.Context()
	l, err := a.Mutex("guard").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var el *etcdlock.Lease
	l.As(&el)
	if el.Revision != int64(l.Token()) {
		t.Fatalf("token %d is not the key's create revision %d", l.Token(), el.Revision)
	}
	var cli *clientv3.Client
	if !a.As(&cli) {
		t.Fatal("Client.As(*clientv3.Client) failed")
	}
	put := func() bool {
		resp, err := cli.Txn(ctx).If(el.IsOwner()).Then(clientv3.OpPut("guarded", "x")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !put() {
		t.Fatal("holder's guarded put failed")
	}
	if err := b.ForceUnlock(ctx, "guard"); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Mutex("guard").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Unlock(ctx)
	if put() {
		t.Fatal("a stale holder's guarded put succeeded")
	}
}

// A 3-member cluster: with one member stopped, locking goes on with no
// double grant; with two stopped, Lock fails by its deadline and grants
// nothing; restarted, it recovers.
func TestThreeMemberCluster(t *testing.T) {
	members, err := embedetcd.StartCluster(3, embedetcd.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	var eps []string
	for _, m := range members {
		eps = append(eps, m.ClientURL)
	}
	ctx := t.Context()
	contend := func(d time.Duration) int64 {
		var inside atomic.Int32
		var n atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(d)
		for range 4 {
			c := open(t, eps...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					l, err := c.Mutex("cluster").Lock(lctx)
					cancel()
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					time.Sleep(time.Millisecond)
					inside.Add(-1)
					_ = l.Unlock(ctx)
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return n.Load()
	}
	if n := contend(time.Second); n == 0 {
		t.Fatal("no acquisitions with 3 members")
	}
	minority := open(t, members[0].ClientURL) // opened while there is a quorum
	members[2].Stop()
	if n := contend(2 * time.Second); n == 0 {
		t.Fatal("no acquisitions with 2 of 3 members")
	}
	members[1].Stop()
	c := minority
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if l, err := c.Mutex("cluster/minority").Lock(lctx); err == nil {
		_ = l.Unlock(ctx)
		t.Fatal("Lock granted with 1 of 3 members")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Logf("Lock without quorum: %v", err)
	}
	for _, m := range members[1:] {
		if err := m.Restart(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := contend(time.Second); n == 0 {
		t.Fatal("no acquisitions after the members came back")
	}
}
