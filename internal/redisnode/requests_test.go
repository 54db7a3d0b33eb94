package redisnode

import (
	"testing"
	"time"

	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// A request id is "seen" by a script only as a whole word of the hold's
// list of recent requests: one id inside another (a node's ids are its
// prefix and a count, so "…-1" is inside "…-12") is another request, which
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
