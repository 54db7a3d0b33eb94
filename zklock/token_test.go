package zklock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
)

// TestTokenIsCzxid checks the tokens taken without reading the node (from
// the parent stat of the create's transaction, or proved from the parent's
// pzxid by createAndRead) against the node's czxid, read on its own, both
// alone and while other clients create and delete nodes of the same lock.
func TestTokenIsCzxid(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	h := &harness{addr: srv.Addr()}
	ctx := t.Context()
	check := rawConn(t, srv.Addr())
	verify := func(l *dlock.Lease) {
		t.Helper()
		var zl *zklock.Lease
		if !l.As(&zl) {
			t.Fatal("Lease.As(*zklock.Lease) failed")
		}
		ok, st, err := check.Exists(zl.Path)
		if err != nil || !ok {
			t.Errorf("node %s: exists %v, %v", zl.Path, ok, err)
			return
		}
		if uint64(st.Czxid) != l.Token() {
			t.Errorf("token %d, but %s has czxid %d", l.Token(), zl.Path, st.Czxid)
		}
	}
	clients := make([]*dlock.Client, 3)
	for i := range clients {
		clients[i] = drivertest.Client(t, h)
	}
	zklock.DisableMulti(clients[2]) // creates alone, and proves tokens from two reads

	const alone = 50
	for _, c := range []*dlock.Client{clients[0], clients[2]} {
		m := c.Mutex("token/alone")
		for range alone {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			verify(l)
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The first Lock of a path reads the parent; then every create comes
	// with the parent's stat.
	if n := zklock.StatTokens(clients[0]); n < alone-1 {
		t.Errorf("%d of %d uncontended tokens came from the create's parent stat; want %d", n, alone, alone-1)
	}
	// The proof needs the three requests to go out in order, which the
	// client's scheduling nearly always, but not always, gives.
	n := zklock.ProvedTokens(clients[2])
	t.Logf("%d of %d uncontended tokens proved without a read", n, alone)
	if n < alone/2 {
		t.Errorf("%d of %d uncontended tokens were proved without a read; want most", n, alone)
	}
	if n := zklock.StatTokens(clients[2]); n != 0 {
		t.Errorf("a client without multi took %d tokens from a create's parent stat", n)
	}

	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for _, c := range clients {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := c.Mutex("token/contended")
				for time.Now().Before(stop) && !t.Failed() {
					// A bound for a hang, not a speed test: nine contenders
					// on a busy machine can wait seconds for their turn.
					lctx, cancel := context.WithTimeout(ctx, time.Minute)
					l, err := m.Lock(lctx)
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					verify(l)
					_ = l.Unlock(ctx)
				}
			}()
		}
	}
	wg.Wait()
	if n := zklock.StatTokens(clients[1]); n == 0 {
		t.Error("no contended token came from a create's parent stat")
	}
}
