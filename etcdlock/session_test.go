package etcdlock_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keepAliveLoops returns the stacks of the sessions' keepalive goroutines.
func keepAliveLoops() []string {
	buf := make([]byte, 8<<20)
	var loops []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "etcdlock.(*session).keepAlive") {
			loops = append(loops, g)
		}
	}
	return loops
}

// unlockAndRevoke unlocks l, then revokes its session's lease behind the
// client's back, as an operator would, or etcd when the lease expires.
func unlockAndRevoke(t *testing.T, admin *clientv3.Client, l *dlock.Lease) {
	t.Helper()
	var el *etcdlock.Lease
	if !l.As(&el) {
		t.Fatal("not an etcd lease")
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Revoke(t.Context(), el.LeaseID); err != nil {
		t.Fatal(err)
	}
}

// A session found lost by a Lock (etcd answered "lease not found" before
// the session's keepalive asked) is replaced, and its keepalive loop must
// end: Close ends only the sessions it knows, and a loop whose refreshes
// fail on the closed etcd client for another reason would retry for good.
// (Found by an adversary pass.)
func TestLostSessionsKeepAliveEnds(t *testing.T) {
	srv := testserver.Etcd(t).Addr()
	cli, err := newClientv3([]string{"http://" + srv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := openCli(t, cli)
	admin := adminClient(t, []string{"http://" + srv})
	ctx := t.Context()
	const ttl = 3 * time.Second // a refresh every second
	before := len(keepAliveLoops())
	for round := range 3 {
		l, err := c.Mutex("lost-keepalive", dlock.WithTTL(ttl)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		unlockAndRevoke(t, admin, l)
		// Finds the lease gone before the keepalive does, and starts another session.
		l, err = c.Mutex(fmt.Sprint("lost-keepalive-", round), dlock.WithTTL(ttl)).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * ttl); ; time.Sleep(100 * time.Millisecond) {
		loops := keepAliveLoops()
		if len(loops) <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d session keepalive loops %v after Close, %d before the client:\n%s",
				len(loops), 5*ttl, before, strings.Join(loops, "\n\n"))
		}
	}
}
