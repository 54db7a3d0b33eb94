package redlock_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// An attempt that won its majority too late (its round trips took longer
// than the lease's validity) gives its holds back, and that frees the lock:
// the cancels must say so on the release channel, as a release does, or the
// waiters that saw those holds, and the attempt's own waiter, sleep out a
// TTL (up to 5 s) with the lock free. Under load that stalled an election
// past TTL+1s (the suite's DeadLeaderReplaced, under make test-busy), and
// three contenders splitting the nodes stalled them all for 5 s.
func TestLateAttemptAnnouncesTheFreedLock(t *testing.T) {
	addrs, px, slow := threeProxied(t)
	raw := rawClients(t, addrs)
	c := drivertest.MustOpen(t, "redlock://"+strings.Join(slow, ",")+"?node_timeout=1s")
	// The lease: 390 ms. Its attempt's two round trips take 400 ms, past
	// its validity, and its holds, set at 300 ms, would expire at 690 ms;
	// the cancels reach the nodes at 500 ms.
	m := c.Mutex("late-attempt", dlock.WithTTL(390*time.Millisecond))
	if l, err := m.TryLock(t.Context()); err != nil { // load the scripts on every node
		t.Fatal(err)
	} else if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	sub := raw[0].Subscribe(t.Context(), "dlock:{late-attempt}:released")
	defer sub.Close()
	if _, err := sub.Receive(t.Context()); err != nil { // the subscription is in place
		t.Fatal(err)
	}
	for _, p := range px {
		p.SetDelay(100 * time.Millisecond)
	}
	_, err := m.TryLock(t.Context())
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock whose majority came after the lease's validity: %v; want ErrNotAcquired", err)
	}
	select {
	case <-sub.Channel():
	case <-time.After(10 * time.Second):
		t.Fatal("the late attempt freed the lock without announcing it")
	}
	for i, r := range raw {
		if n, err := r.Exists(t.Context(), "dlock:{late-attempt}").Result(); err != nil || n != 0 {
			t.Errorf("node %d still has the lock after the late attempt (%d, %v)", i, n, err)
		}
	}
}

// A waiter whose attempts come too late takes the lock once the nodes
// answer in time again: its own cancels wake it, where it used to wait for
// a release (5 s, the wait's longest sleep) of a lock nobody held.
func TestLateAttemptsThenTheLock(t *testing.T) {
	_, px, slow := threeProxied(t)
	for _, p := range px {
		p.SetDelay(40 * time.Millisecond)
	}
	c := drivertest.MustOpen(t, "redlock://"+strings.Join(slow, ",")+"?node_timeout=1s")
	got := make(chan error, 1)
	go func() {
		l, err := c.Mutex("late-attempts", dlock.WithTTL(150*time.Millisecond)).Lock(t.Context())
		if err == nil {
			err = l.Unlock(t.Context())
		}
		got <- err
	}()
	time.Sleep(time.Second) // several attempts, each too late
	for _, p := range px {
		p.SetDelay(0)
	}
	ended := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("locked %v after the nodes answered in time again", time.Since(ended))
	case <-time.After(3 * time.Second): // liveness: the old code slept 5 s
		t.Fatal("Lock still waiting 3 s after the nodes answered in time again, with the lock free")
	}
}

// An attempt that too few nodes answered is an error that says so, as when
// too few give their counters, and not ErrNotAcquired (which says another
// owner holds the lock); a waiting Lock retries it with backoff, where a
// refusal waited for a release nobody would send.
func TestSilentMajorityIsAnError(t *testing.T) {
	_, addrs := fiveNodes(t)
	sil := &silencer{}
	c, _ := silenced(t, addrs, sil, 0)
	m := c.Mutex("silent-majority", dlock.WithTTL(10*time.Second))
	if l, err := m.TryLock(t.Context()); err != nil { // load the scripts on every node
		t.Fatal(err)
	} else if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	sil.armed.Store(true)
	_, err := m.TryLock(t.Context())
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) || !strings.Contains(err.Error(), "only 2 of 5 nodes answered") {
		t.Fatalf("TryLock with 3 of 5 nodes silent: %v; want an error naming the 2 of 5 that answered", err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := m.Lock(t.Context())
		if err == nil {
			err = l.Unlock(t.Context())
		}
		got <- err
	}()
	time.Sleep(time.Second)
	sil.armed.Store(false)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Second): // liveness: the old code slept 5 s
		t.Fatal("Lock still waiting 3 s after the nodes answered again, with the lock free")
	}
}

// But where a node that answered names another holder, the attempt is a
// refusal, as before: another owner holds the lock on every node, and the
// contender's grant round is answered by node 0 alone (held), its requests
// to nodes 1 and 2 running there with their replies lost. (An adversary
// pass on the change above, which had made this an error.)
func TestHeldLockWithSilentMajorityIsRefused(t *testing.T) {
	addrs, px, via := threeProxied(t)
	x := drivertest.MustOpen(t, "redlock://"+strings.Join(addrs, ","))
	y := drivertest.MustOpen(t, "redlock://"+strings.Join(via, ","))
	ctx := t.Context()
	const name = "held-silent-majority"
	if l, err := y.Mutex(name, dlock.WithTTL(10*time.Second)).TryLock(ctx); err != nil { // load the scripts
		t.Fatal(err)
	} else if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lx, err := x.Mutex(name, dlock.WithTTL(10*time.Second)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lx.Unlock(ctx)
	px[1].BlackholeAfter([]byte("_acquire"))
	px[2].BlackholeAfter([]byte("_acquire"))
	if _, err := y.Mutex(name, dlock.WithTTL(10*time.Second)).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while another owner holds the lock (node 0 said so): %v; want ErrNotAcquired", err)
	}
}

// threeProxied starts three nodes and a proxy before each, and returns the
// nodes' addresses, the proxies and the proxies' addresses.
func threeProxied(t *testing.T) ([]string, []*testserver.Proxy, []string) {
	t.Helper()
	var addrs, via []string
	var px []*testserver.Proxy
	for range 3 {
		a := testserver.Redis(t).Addr()
		addrs = append(addrs, a)
		p := testserver.NewProxy(t, a)
		px = append(px, p)
		via = append(via, p.Addr())
	}
	return addrs, px, via
}
