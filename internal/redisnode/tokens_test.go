package redisnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// nodes returns a node that calls the scripts with FCALL and one that
// calls them with EVALSHA, over one server.
func nodes(t *testing.T) (*redis.Client, map[string]*Node) {
	t.Helper()
	srv := testserver.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	ev := New(rdb, "")
	ev.UseEval()
	return rdb, map[string]*Node{"fcall": New(rdb, ""), "eval": ev}
}

// holdLifecycle re-enters, renews, inspects and releases twice the hold
// owner just got with token want on k, failing the test if any step does
// not see that hold with that token.
func holdLifecycle(t *testing.T, n *Node, k Keys, owner string, g Grant, want uint64) {
	t.Helper()
	ctx := t.Context()
	if !g.Acquired || g.Token != want {
		t.Fatalf("%s: grant %+v; want token %d", k.name, g, want)
	}
	g2, err := n.Acquire(ctx, k, owner, "", time.Minute, 1, n.NewRequest(), "")
	if err != nil || !g2.Acquired || g2.Holds != 2 || g2.Token != want {
		t.Fatalf("%s: re-entry: %+v, %v; want 2 holds of token %d", k.name, g2, err, want)
	}
	if errs := n.RenewMany(ctx, []Hold{{Name: k.name, Owner: owner, Token: want, TTL: time.Minute, Keys: k}}); errs[0] != nil {
		t.Fatalf("%s: renew: %v", k.name, errs[0])
	}
	var info driver.Info
	if k.kind == driver.Exclusive {
		info, err = n.Inspect(ctx, k.name)
	} else {
		info, err = n.InspectKind(ctx, k.name, k.kind)
	}
	if err != nil || info.Token != want || info.Holds != 2 {
		t.Fatalf("%s: inspect: %+v, %v; want 2 holds of token %d", k.name, info, err, want)
	}
	for left := 1; left >= 0; left-- {
		if got, err := n.releaseReq(ctx, k, owner, want, 1, false, n.NewRequest()); err != nil || got != left {
			t.Fatalf("%s: release: %d left, %v; want %d", k.name, got, err, left)
		}
	}
}

// A token is written into the store as its digits on every path that
// grants one, so the holder's later calls, which send it as digits, find
// their hold. Lua's own number-to-string (the '..' operator, %.14g) writes
// 10^14 as "1e+14", and Redis 7.0's (a number passed to redis.call,
// %.17g) writes 10^17 as "1e+17": a read-write lock or semaphore whose
// counter passed 10^14 failed its re-entry with a script error and lost
// its lease at the first renewal, and a mutex handed to a waiter with a
// token of 10^17 or more lost it too. (Tokens above 2^53 are not exact in
// Lua at all; these are the largest that are.)
func TestTokensAreWrittenAsDigits(t *testing.T) {
	rdb, ns := nodes(t)
	ctx := t.Context()
	for mode, n := range ns {
		for _, want := range []uint64{1e14, 1e15 + 1, 1 << 53} {
			for _, kind := range []driver.Kind{driver.Shared, driver.Write, driver.Permit} {
				name := fmt.Sprintf("digits-%s-%d-%v", mode, want, kind)
				k := NewKindKeys(n.prefix, name, kind)
				rdb.Set(ctx, k.token, want-1, 0)
				g, err := n.Acquire(ctx, k, "o", "", time.Minute, 1, n.NewRequest(), "")
				if err != nil {
					t.Fatalf("%s: acquire: %v", name, err)
				}
				holdLifecycle(t, n, k, "o", g, want)
			}
		}
		for _, want := range []uint64{1e14, 1e17, 1e17 + 64, 1<<62 + 1<<20} {
			// Past 2^53 only multiples of a power of two are exact; these are.
			for _, path := range []string{"free", "queued", "handoff"} {
				name := fmt.Sprintf("digits-%s-%d-%s", mode, want, path)
				k := n.Keys(name)
				var g Grant
				var err error
				switch path {
				case "free": // the fast path
					rdb.Set(ctx, k.token, want-1, 0)
					g, err = n.Acquire(ctx, k, "o", "", time.Minute, 0, n.NewRequest(), "")
				case "queued": // the slow path: a queue key with no live place in it
					rdb.Set(ctx, k.token, want-1, 0)
					rdb.RPush(ctx, k.queue, "gone")
					g, err = n.Acquire(ctx, k, "o", "", time.Minute, 0, n.NewRequest(), "")
				case "handoff":
					rdb.Set(ctx, k.token, want-2, 0)
					first, err := n.Acquire(ctx, k, "a", "", time.Minute, 0, n.NewRequest(), "")
					if err != nil || !first.Acquired {
						t.Fatalf("%s: first holder: %+v, %v", name, first, err)
					}
					req := n.NewRequest()
					if q, err := n.Acquire(ctx, k, "o", "", time.Minute, 0, req, "handoffs"); err != nil || q.Acquired {
						t.Fatalf("%s: queue: %+v, %v; want a place in the queue", name, q, err)
					}
					if _, err := n.releaseReq(ctx, k, "a", first.Token, 1, false, n.NewRequest()); err != nil {
						t.Fatalf("%s: first holder's release: %v", name, err)
					}
					g, err = n.Acquire(ctx, k, "o", "", time.Minute, 0, req, "handoffs") // the proof of the handoff
				}
				if err != nil {
					t.Fatalf("%s: acquire: %v", name, err)
				}
				holdLifecycle(t, n, k, "o", g, want)
			}
		}
	}
}
