// The race detector is off for this file: on reconnecting with watches set,
// go-zookeeper v1.0.4 (the latest release) reads Conn.lastZxid in
// sendSetWatches while recvLoop writes it, unsynchronised
// (samuel/go-zookeeper#260; the fix, go-zookeeper/zk#35, is not merged), and
// killing the leader makes every client reconnect with waiters' watches set.
// The race detector cannot ignore one report, so `make test` runs
// TestEnsemble in a second `go test` without -race; zklock's own code on the
// reconnect path stays under -race in the fault suite's zk scenarios and
// TestBlackholedHolderIsToldFirst.

//go:build !race

package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// ensembleClient opens a dlock client on a connection to every member, in
// a random order.
func ensembleClient(t *testing.T, servers []*testserver.Server) *dlock.Client {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	rand.Shuffle(len(addrs), func(i, j int) { addrs[i], addrs[j] = addrs[j], addrs[i] })
	return openZK(t, addrs, sessionTimeout)
}

func leader(t *testing.T, servers []*testserver.Server) *testserver.Server {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range servers {
			if testserver.ZooKeeperMode(s) == "leader" {
				return s
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no leader after 30s")
	return nil
}

// exclusion watches the holders of one lock: a holder entering while
// another's lease is still live (its Done not closed) is a double grant, and
// so is a fencing token not above every earlier holder's.
type exclusion struct {
	mu       sync.Mutex
	current  *dlock.Lease
	last     uint64
	grants   atomic.Int64
	failures []string
}

func (x *exclusion) enter(l *dlock.Lease) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.grants.Add(1)
	if x.current != nil {
		select {
		case <-x.current.Done():
		default:
			x.failures = append(x.failures, fmt.Sprintf("token %d granted while token %d was live", l.Token(), x.current.Token()))
		}
	}
	if l.Token() <= x.last {
		x.failures = append(x.failures, fmt.Sprintf("token %d after token %d", l.Token(), x.last))
	}
	x.current, x.last = l, l.Token()
}

func (x *exclusion) leave(l *dlock.Lease) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.current == l {
		x.current = nil
	}
}

// contend runs 3 clients × 3 goroutines locking name until stop closes.
func contend(t *testing.T, servers []*testserver.Server, name string, x *exclusion, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range 3 {
		c := ensembleClient(t, servers)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					l, err := c.Mutex(name).Lock(ctx)
					cancel()
					if err != nil {
						time.Sleep(50 * time.Millisecond) // no quorum yet: errors, never grants
						continue
					}
					x.enter(l)
					time.Sleep(2 * time.Millisecond)
					x.leave(l)
					ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
					_ = l.Unlock(ctx)
					cancel()
				}
			}()
		}
	}
	return &wg
}

// A 3-server ensemble: killing the leader while the lock is held and
// contended never double-grants and locking resumes; with two members down
// nothing is granted (Lock ends by its deadline) and a held lease is
// reported lost; with a majority back locking resumes.
func TestEnsemble(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server ensemble")
	}
	servers := testserver.ZooKeeperEnsemble(t, 3)

	t.Run("KillLeader", func(t *testing.T) {
		x := &exclusion{}
		stop := make(chan struct{})
		wg := contend(t, servers, "ensemble/leader", x, stop)
		waitGrants := func(n int64, what string) {
			deadline := time.Now().Add(30 * time.Second)
			for x.grants.Load() < n {
				if time.Now().After(deadline) {
					close(stop)
					wg.Wait()
					t.Fatalf("%s: %d grants after 30s, want %d", what, x.grants.Load(), n)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		waitGrants(30, "before the kill")
		l := leader(t, servers)
		l.Kill()
		before := x.grants.Load()
		waitGrants(before+30, "after killing the leader")
		close(stop)
		wg.Wait()
		if err := l.Start(); err != nil {
			t.Fatalf("restart %s: %v", l.Name, err)
		}
		for _, f := range x.failures {
			t.Error(f)
		}
		t.Logf("%d grants, %d after the leader was killed", x.grants.Load(), x.grants.Load()-before)
	})

	t.Run("KillTwo", func(t *testing.T) {
		holder, other := ensembleClient(t, servers), ensembleClient(t, servers)
		held, err := holder.Mutex("ensemble/held").Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		down := []*testserver.Server{}
		for _, s := range servers {
			if len(down) < 2 {
				s.Kill()
				down = append(down, s)
			}
		}
		for _, name := range []string{"ensemble/held", "ensemble/free"} {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			l, err := other.Mutex(name).Lock(ctx)
			cancel()
			if err == nil {
				t.Fatalf("Lock(%s) granted token %d with a minority up", name, l.Token())
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Logf("Lock(%s) with a minority up: %v", name, err)
			}
		}
		select {
		case <-held.Done():
			if !errors.Is(held.Err(), dlock.ErrLeaseLost) {
				t.Errorf("held lease ended with %v; want ErrLeaseLost", held.Err())
			}
		case <-time.After(sessionTimeout + 2*time.Second):
			t.Fatal("held lease still live with a minority up, past the session timeout")
		}
		if err := down[0].Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		l, err := other.Mutex("ensemble/held").Lock(ctx)
		if err != nil {
			t.Fatalf("Lock with a majority back: %v", err)
		}
		if l.Token() <= held.Token() {
			t.Errorf("token %d after the lost holder's %d", l.Token(), held.Token())
		}
		_ = l.Unlock(ctx)
		if err := down[1].Start(); err != nil {
			t.Fatal(err)
		}
	})
}
