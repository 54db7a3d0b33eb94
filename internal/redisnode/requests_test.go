package redisnode

import (
	"errors"
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

// A release sent again (by the node after an uncertain failure, or by
// go-redis after a lost reply) may have run already, and the hold lists only
// the last RECENT requests that changed it, of every process of its owner.
// Process A's release ran (its reply lost), B's hold of the same owner kept
// the lock, and RECENT re-entries and releases of a third process C went
// by: A's release, sent again, was taken for a new one and freed B's hold,
// while B's lease read valid (an adversary's double grant, on every kind,
// through dlock's resend and through go-redis's retry alike). The hold now
// marks, per node, the latest of its ids it dropped, and a release of that
// node not listed and not newer is refused (errForgotten); settle gives it
// up, and B's hold stays. One the hold still lists acts once, as before; a
// newer one of the same node, and one of a node with nothing dropped, act.
func TestForgottenReleaseSentAgainIsGivenUp(t *testing.T) {
	_, ns := nodes(t)
	ctx := t.Context()
	for mode, n := range ns {
		for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Shared, driver.Permit} {
			name := fmt.Sprintf("forgotten-%s-%v", mode, kind)
			k := NewKindKeys(n.prefix, name, kind)
			acquire := func(want int) Grant {
				t.Helper()
				g, err := n.Acquire(ctx, k, "o", "", time.Minute, 2, n.NewRequest(), "")
				if err != nil || !g.Acquired || g.Holds != want {
					t.Fatalf("%s: acquire: %+v, %v; want %d holds", name, g, err, want)
				}
				return g
			}
			g := acquire(1) // A's
			acquire(2)      // B's
			reqA := n.NewRequest()
			if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, reqA); err != nil || left != 1 {
				t.Fatalf("%s: A's release: %d left, %v", name, left, err)
			}
			// Sent again at once, A's release is still listed: it acts once.
			if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, reqA); err != nil || left != 1 {
				t.Fatalf("%s: A's release sent again at once: %d left, %v; want 1", name, left, err)
			}
			for i := 0; i < recentRequests; i++ { // C's churn
				acquire(2)
				if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, n.NewRequest()); err != nil || left != 1 {
					t.Fatalf("%s: C's release %d: %d left, %v", name, i, left, err)
				}
			}
			if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, reqA); !errors.Is(err, errForgotten) {
				t.Fatalf("%s: A's release sent again after the churn: %d left, %v; want errForgotten", name, left, err)
			}
			n.remember(k, "o", pendingRelease{token: g.Token, count: 1, req: reqA})
			if err := n.settle(ctx, k, "o"); err != nil || n.Pending(k, "o") != 0 {
				t.Fatalf("%s: settle: %v, %d pending; want it given up", name, err, n.Pending(k, "o"))
			}
			// A node whose ids were never dropped is not refused, whatever
			// its count: a re-entry and release through another node.
			other := New(n.rdb, n.prefix)
			if mode == "eval" {
				other.UseEval()
			}
			if g2, err := other.Acquire(ctx, k, "o", "", time.Minute, 2, other.NewRequest(), ""); err != nil || g2.Holds != 2 {
				t.Fatalf("%s: another node's re-entry: %+v, %v", name, g2, err)
			}
			if left, err := other.releaseReq(ctx, k, "o", g.Token, 1, false, other.NewRequest()); err != nil || left != 1 {
				t.Fatalf("%s: another node's release: %d left, %v; want 1", name, left, err)
			}
			// B's hold is there: its release (newer than any dropped) is the last.
			if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, n.NewRequest()); err != nil || left != 0 {
				t.Fatalf("%s: B's release: %d left, %v; want 0", name, left, err)
			}
			// A release sent again that a fresh hold never saw, with nothing
			// dropped from its list, acts (the release that failed did not run).
			g = acquire(1)
			acquire(2)
			if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, n.NewRequest()); err != nil || left != 1 {
				t.Fatalf("%s: a release sent again, never run: %d left, %v; want 1", name, left, err)
			}
			if left, err := n.releaseReq(ctx, k, "o", g.Token, 1, false, n.NewRequest()); err != nil || left != 0 {
				t.Fatalf("%s: last release: %d left, %v", name, left, err)
			}
		}
	}
}
