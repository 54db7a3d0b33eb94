package redisnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// A request id is "seen" by a script only as a whole word of the hold's
// list of recent requests: one id inside another (a node's ids are its
// prefix and a count, so "….1" is inside "….12") is another request, which
// acts. The scripts look for the id as a substring first and then as a
// word; a script that stopped at the first look would take each of the
// calls below for a retry and change nothing.
func TestRequestIDsMatchWhole(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, eval := range []bool{false, true} {
		n := New(rdb, "")
		if eval {
			n.UseEval()
		}
		k := n.Keys("whole-ids")
		const owner = "owner"
		g, err := n.Acquire(ctx, k, owner, "", time.Minute, 0, "n-12", "")
		if err != nil || !g.Acquired || g.Holds != 1 {
			t.Fatalf("eval=%v: first acquire: %+v, %v", eval, g, err)
		}
		g, err = n.Acquire(ctx, k, owner, "", time.Minute, 0, "n-1", "") // inside "n-12"
		if err != nil || !g.Acquired || g.Holds != 2 {
			t.Fatalf("eval=%v: re-entry as n-1 after n-12: %+v, %v; want 2 holds", eval, g, err)
		}
		left, err := n.releaseReq(ctx, k, owner, g.Token, 1, false, "-1") // inside both
		if err != nil || left != 1 {
			t.Fatalf("eval=%v: release as -1: %d left, %v; want 1", eval, left, err)
		}
		if left, err = n.releaseReq(ctx, k, owner, g.Token, 1, false, "-1"); err != nil || left != 1 {
			t.Fatalf("eval=%v: the same release again: %d left, %v; want 1 (it acts once)", eval, left, err)
		}
		if left, err = n.releaseReq(ctx, k, owner, g.Token, 1, false, "n-"); err != nil || left != 0 {
			t.Fatalf("eval=%v: release as n-: %d left, %v; want 0", eval, left, err)
		}
	}
}

// A script sent again after its reply was lost runs with the same request
// id, and acts once: a new hold (on the fast path, a free lock nobody
// queues for, and on the slow path, where the queue key exists), a
// re-entry and a release, on every kind of lock, with FCALL and with EVAL.
// (redislock's TestRetriedScriptsApplyOnce drops real replies; this runs
// every path.)
func TestScriptsRunTwiceActOnce(t *testing.T) {
	rdb, ns := nodes(t)
	ctx := t.Context()
	for mode, n := range ns {
		for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Permit} {
			for _, queue := range []bool{false, true} {
				name := fmt.Sprintf("twice-%s-%v-%v", mode, kind, queue)
				k := NewKindKeys(n.prefix, name, kind)
				if queue { // a queue key whose only place has gone
					rdb.RPush(ctx, k.queue, "gone")
				}
				twice := func(step string, req string, holds int) Grant {
					t.Helper()
					var g [2]Grant
					for i := range g {
						var err error
						if g[i], err = n.Acquire(ctx, k, "o", "", time.Minute, 1, req, ""); err != nil || !g[i].Acquired || g[i].Holds != holds {
							t.Fatalf("%s: %s, run %d: %+v, %v; want %d holds", name, step, i+1, g[i], err, holds)
						}
					}
					if g[1].Token != g[0].Token {
						t.Fatalf("%s: %s: tokens %d, then %d", name, step, g[0].Token, g[1].Token)
					}
					return g[0]
				}
				g := twice("new hold", n.NewRequest(), 1)
				twice("re-entry", n.NewRequest(), 2)
				req := n.NewRequest()
				for run := 1; run <= 2; run++ {
					if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, req); err != nil || left != 1 {
						t.Fatalf("%s: release, run %d: %d left, %v; want 1", name, run, left, err)
					}
				}
				if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, n.NewRequest()); err != nil || left != 0 {
					t.Fatalf("%s: last release: %d left, %v; want 0", name, left, err)
				}
			}
		}
	}
}
