package etcdlock_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/dlock/dlock/internal/testserver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// adminClient is an etcd client of endpoints, beside dlock's, closed when t
// ends.
func adminClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := newClientv3(endpoints, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func open(t *testing.T, endpoints ...string) *dlock.Client {
	t.Helper()
	cli, err := newClientv3(endpoints, nil)
	if err != nil {
		t.Fatal(err)
	}
	return openCli(t, cli)
}

// openCli opens a dlock client on cli, which it closes when the test ends.
func openCli(t *testing.T, cli *clientv3.Client) *dlock.Client {
	t.Helper()
	c, err := etcdlock.Open(t.Context(), cli, etcdlock.Options{CloseClient: true})
	if err != nil {
		_ = cli.Close()
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
	// etcdctl's key has an empty value: held, with no owner id or label.
	if info, err := c.Inspect(ctx, "interop"); err != nil || !info.Held || info.Owner != "" || info.Label != "" {
		t.Fatalf("Inspect while etcdctl holds = %+v, %v; want held, no owner or label", info, err)
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
	locked := drivertest.Go(func() (struct{}, error) {
		cmd := exec.CommandContext(ctx, etcdctl, "--endpoints="+ep, "lock", "interop", "--", "true")
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		err := cmd.Run()
		etcdctlRan.Store(true)
		return struct{}{}, err
	})
	time.Sleep(time.Second)
	if etcdctlRan.Load() {
		t.Fatal("etcdctl lock ran while dlock held the lock")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	locked.Want(t, 10*time.Second, "etcdctl lock after dlock unlocked")
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
	admin := adminClient(t, eps)
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

// Killing the leader of a 3-member cluster while 4 clients contend for one
// name: exclusion holds, and locking resumes within the election time and a
// couple of seconds (a client pinned to the dead member, or a request lost
// with it and never timed out, stalled it until the member came back).
func TestLeaderKillUnderContention(t *testing.T) {
	const election = 500 * time.Millisecond
	// The promise is election + 2s; the bound leaves room for this loaded
	// machine while catching a stall of a request timeout (5s and more).
	const bound = 4 * time.Second
	members := testserver.EtcdCluster(t, 3, election)
	var eps []string
	for _, m := range members {
		eps = append(eps, "http://"+m.Addr())
	}
	ctx := t.Context()
	admin := adminClient(t, eps)
	leader := func() *testserver.Server {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			for _, m := range members {
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				st, err := admin.Status(sctx, "http://"+m.Addr())
				cancel()
				if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
					return m
				}
			}
		}
		t.Fatal("no leader")
		return nil
	}
	var (
		mu     sync.Mutex
		grants []time.Time
		inside atomic.Int32
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		c := open(t, eps...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				l, err := c.Mutex("leaderkill").Lock(lctx)
				cancel()
				if err != nil {
					t.Logf("Lock: %v", err)
					continue
				}
				if inside.Add(1) != 1 {
					t.Error("two holders at once")
				}
				mu.Lock()
				grants = append(grants, time.Now())
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					t.Logf("Unlock: %v", err)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	// grantsAfter waits for n grants after t0 and returns the longest wait
	// between t0 and the first of them or between two of them.
	grantsAfter := func(t0 time.Time, n int) time.Duration {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			var after []time.Time
			for _, g := range grants {
				if g.After(t0) {
					after = append(after, g)
				}
			}
			mu.Unlock()
			if len(after) < n {
				continue
			}
			longest, prev := time.Duration(0), t0
			for _, g := range after[:n] {
				longest, prev = max(longest, g.Sub(prev)), g
			}
			return longest
		}
		t.Fatalf("fewer than %d grants in 30s after %v", n, t0)
		return 0
	}
	for round := range 5 {
		grantsAfter(time.Now(), 20) // contention under way
		m := leader()
		killed := time.Now()
		m.Kill()
		gap := grantsAfter(killed, 10)
		t.Logf("round %d: killed the leader %s; longest wait for a grant after it: %v", round, m.Name, gap.Round(time.Millisecond))
		if gap > bound {
			t.Errorf("round %d: locking stalled %v after the leader was killed (election timeout %v)", round, gap, election)
		}
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
}

// A waiter whose session lease ended while it waited (a process paused past
// its TTL: its key went with the lease) is not granted when the keys before
// its old one are gone: it queues again, with a new key in a new session,
// behind whoever queued meanwhile, and gets the lock after them with a higher
// token. Paused: its client does not know the lease ended until the wait is
// over; not paused: its keepalive finds out while it waits.
func TestWaiterSessionLost(t *testing.T) {
	for _, paused := range []bool{true, false} {
		t.Run(map[bool]string{true: "paused", false: "keepalive"}[paused], func(t *testing.T) {
			testWaiterSessionLost(t, paused)
		})
	}
}

func testWaiterSessionLost(t *testing.T, paused bool) {
	eps := embedded(t)
	a, b, c := open(t, eps...), open(t, eps...), open(t, eps...)
	ctx := t.Context()
	admin := adminClient(t, eps)
	const ttl = 3 * time.Second
	const name = "waiterlost"
	keys := func() []*mvccpb.KeyValue {
		resp, err := admin.Get(ctx, name+"/", clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Kvs
	}
	waitFor := func(what string, ok func([]*mvccpb.KeyValue) bool) []*mvccpb.KeyValue {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if kvs := keys(); ok(kvs) {
				return kvs
			}
		}
		t.Fatalf("no %s after 10s: keys %v", what, keys())
		return nil
	}
	type result struct {
		l   *dlock.Lease
		err error
	}
	lock := func(c *dlock.Client) chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := c.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
			ch <- result{l, err}
		}()
		return ch
	}
	receive := func(who string, ch chan result) *dlock.Lease {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("%s: Lock: %v", who, r.err)
			}
			return r.l
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not granted after 10s", who)
			return nil
		}
	}

	la, err := a.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bc := lock(b)
	waitFor("waiter b", func(kvs []*mvccpb.KeyValue) bool { return len(kvs) == 2 })
	cc := lock(c)
	bKey := waitFor("waiter c", func(kvs []*mvccpb.KeyValue) bool { return len(kvs) == 3 })[1]
	if paused {
		etcdlock.PauseKeepAlives(b)
	}
	// b's key goes with its session's lease, as if that expired while b was paused.
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(bKey.Lease)); err != nil {
		t.Fatal(err)
	}
	if !paused { // b's keepalive finds out and b queues again, behind c
		waitFor("new key of b", func(kvs []*mvccpb.KeyValue) bool { return len(kvs) == 3 })
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lc := receive("c", cc)
	select {
	case r := <-bc:
		if r.err == nil {
			t.Fatalf("b granted (token %d, err %v) while c holds the lock (token %d)", r.l.Token(), r.l.Err(), lc.Token())
		}
		t.Fatalf("b: Lock: %v", r.err)
	case <-time.After(2 * time.Second): // b waits, behind c
	}
	if err := lc.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lb := receive("b", bc)
	if lb.Token() <= lc.Token() {
		t.Fatalf("b's token %d is not above c's %d", lb.Token(), lc.Token())
	}
	if err := lb.Err(); err != nil {
		t.Fatalf("b's lease: %v", err)
	}
	var el *etcdlock.Lease
	if !lb.As(&el) {
		t.Fatal("Lease.As(*etcdlock.Lease) failed")
	}
	if el.LeaseID == clientv3.LeaseID(bKey.Lease) {
		t.Fatal("b holds under the revoked session lease")
	}
	kvs := keys()
	if len(kvs) != 1 || string(kvs[0].Key) != el.Key || kvs[0].CreateRevision != int64(lb.Token()) ||
		kvs[0].Lease != int64(el.LeaseID) {
		t.Fatalf("b holds token %d, key %s, lease %x; etcd has %v", lb.Token(), el.Key, el.LeaseID, kvs)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if kvs := keys(); len(kvs) != 0 {
		t.Fatalf("keys left behind: %v", kvs)
	}
}

// With the server frozen (SIGSTOP: connections open, no answers), every call
// of a URL-opened client's driver returns once its ctx ends, and Unlock with
// a ctx of its own.
func TestCallsFollowCtx(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := t.Context()
	c := drivertest.MustOpen(t, "etcd://"+srv.Addr())
	const ttl = 2 * time.Second
	l, err := c.Mutex("frozen", dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var el *etcdlock.Lease
	if !l.As(&el) {
		t.Fatal("Lease.As(*etcdlock.Lease) failed")
	}
	d := etcdlock.DriverOf(c)
	held := driver.Held{Name: "frozen", Owner: l.Owner(), TTL: ttl, Token: l.Token(), Handle: el}
	var cli *clientv3.Client
	if !c.As(&cli) {
		t.Fatal("Client.As(*clientv3.Client) failed")
	}
	srv.Pause()
	defer srv.Resume()
	for { // SIGSTOP takes effect a moment after kill returns
		gctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := cli.Get(gctx, "x")
		cancel()
		if err != nil {
			break
		}
	}
	calls := map[string]func(context.Context) error{
		"Renew": func(ctx context.Context) error { return d.Renew(ctx, []driver.Held{held})[0].Err },
		"Acquire": func(ctx context.Context) error {
			_, err := d.Acquire(ctx, driver.Request{Name: "frozen2", Owner: "o", TTL: ttl, Wait: true})
			return err
		},
		"Inspect": func(ctx context.Context) error { _, err := d.Inspect(ctx, "frozen"); return err },
		"Release": func(ctx context.Context) error { err := d.Release(ctx, held, 1); return err },
	}
	for _, name := range []string{"Renew", "Acquire", "Inspect", "Release"} {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		call := drivertest.Go(func() (struct{}, error) { return struct{}{}, calls[name](cctx) })
		if _, err := call.Result(t, 10*time.Second, name+" with its ctx ended"); err == nil {
			t.Errorf("%s succeeded against a frozen server", name)
		}
		cancel()
	}
	uctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	unlock := drivertest.Go(func() (struct{}, error) { return struct{}{}, l.Unlock(uctx) })
	_, _ = unlock.Result(t, 10*time.Second, "Unlock with its ctx ended")
}

// A key of the client's left under its session for a name (a retried put,
// or an earlier contender's key still being dropped) is taken over by the
// next contender: it holds with that key, whose create revision is the
// token, and the key carries the new holder's owner id and label.
func TestLeftoverKeyIsTakenOver(t *testing.T) {
	eps := embedded(t)
	c := open(t, eps...)
	ctx := t.Context()
	l, err := c.Mutex("session").Lock(ctx) // starts the session of the default TTL
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	var el *etcdlock.Lease
	l.As(&el)
	admin := adminClient(t, eps)
	key := fmt.Sprintf("leftover/%x", int64(el.LeaseID))
	put, err := admin.Put(ctx, key, "stale", clientv3.WithLease(el.LeaseID))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := c.Mutex("leftover", dlock.WithLabel("new-holder")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var el2 *etcdlock.Lease
	l2.As(&el2)
	if el2.Key != key || el2.LeaseID != el.LeaseID || l2.Token() != uint64(put.Header.Revision) {
		t.Fatalf("holds with key %q lease %x token %d, want the leftover %q lease %x token %d",
			el2.Key, el2.LeaseID, l2.Token(), key, el.LeaseID, put.Header.Revision)
	}
	info, err := c.Inspect(ctx, "leftover")
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Owner != l2.Owner() || info.Label != "new-holder" || info.Token != l2.Token() {
		t.Fatalf("Inspect = %+v, want held by %s labelled new-holder with token %d", info, l2.Owner(), l2.Token())
	}
	get, err := admin.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(get.Kvs) != 1 || get.Kvs[0].Lease != int64(el.LeaseID) {
		t.Fatalf("the key after the grant: %v, want it under lease %x", get.Kvs, el.LeaseID)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if get, err = admin.Get(ctx, key); err != nil || len(get.Kvs) != 0 {
		t.Fatalf("the key after Unlock: %v, %v; want it gone", get, err)
	}
}
