package redisnode

import (
	"fmt"
	"strings"
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
// token of 10^17 or more lost it too (such tokens are now refused: see
// TestTokensStopBelow2To53).
func TestTokensAreWrittenAsDigits(t *testing.T) {
	rdb, ns := nodes(t)
	ctx := t.Context()
	for mode, n := range ns {
		for _, want := range []uint64{1e14, 1e15 + 1, TokenLimit - 1} {
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
		for _, want := range []uint64{1e14, TokenLimit - 1} {
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
					var first Grant
					if first, err = n.Acquire(ctx, k, "a", "", time.Minute, 0, n.NewRequest(), ""); err != nil || !first.Acquired {
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

// grantOrPast polls an acquire of req until it holds or fails; a failure
// must be the refusal past TokenLimit.
func grantOrPast(t *testing.T, n *Node, k Keys, owner, req, channel string) (Grant, bool) {
	t.Helper()
	for range 10 { // a waiter's polls each drop one popped place; one or two suffice
		g, err := n.Acquire(t.Context(), k, owner, "", time.Minute, 1, req, channel)
		switch {
		case err != nil && strings.Contains(err.Error(), pastLimit):
			return Grant{}, false
		case err != nil:
			t.Fatalf("%s: acquire: %v", k.name, err)
		case g.Acquired:
			return g, true
		}
	}
	t.Fatalf("%s: acquire neither held nor failed", k.name)
	return Grant{}, false
}

// Redis's Lua holds numbers as doubles, so INCR's 2^53 + 1 reads as 2^53:
// with a counter set past it by hand, the scripts gave the next holder the
// token of the one before (a fencing token that did not increase), and
// Redlock, whose token max+1 read as max, found it at or below the
// counter on every node and could never take the free lock. Every path
// that gives out a token now either gives one above every earlier holder's
// or fails with an error that says why.
func TestTokensStopBelow2To53(t *testing.T) {
	rdb, ns := nodes(t)
	ctx := t.Context()
	for mode, n := range ns {
		for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Permit} {
			for _, handoff := range []bool{false, true} {
				name := fmt.Sprintf("past-%s-%v-%v", mode, kind, handoff)
				k := NewKindKeys(n.prefix, name, kind)
				rdb.Set(ctx, k.token, TokenLimit-2, 0)
				var last uint64
				for round := range 3 {
					g, ok := grantOrPast(t, n, k, "h", n.NewRequest(), "")
					if !ok {
						break
					}
					if round == 0 && g.Token != TokenLimit-1 || g.Token <= last {
						t.Fatalf("%s: round %d: token %d after %d", name, round, g.Token, last)
					}
					last = g.Token
					if handoff {
						req := n.NewRequest()
						if q, err := n.Acquire(ctx, k, "w", "", time.Minute, 1, req, "handoffs"); err != nil || q.Acquired {
							t.Fatalf("%s: queue: %+v, %v", name, q, err)
						}
						if _, err := n.releaseReq(ctx, k, "h", g.Token, 1, false, n.NewRequest()); err != nil {
							t.Fatalf("%s: release: %v", name, err)
						}
						if g, ok = grantOrPast(t, n, k, "w", req, "handoffs"); !ok {
							break
						}
						if g.Token <= last {
							t.Fatalf("%s: round %d: handed token %d after %d", name, round, g.Token, last)
						}
						last = g.Token
						if _, err := n.releaseReq(ctx, k, "w", g.Token, 1, false, n.NewRequest()); err != nil {
							t.Fatalf("%s: release: %v", name, err)
						}
						continue
					}
					if _, err := n.releaseReq(ctx, k, "h", g.Token, 1, false, n.NewRequest()); err != nil {
						t.Fatalf("%s: release: %v", name, err)
					}
				}
			}
		}
		// Redlock: the token is max+1 of the counters, sent to each node.
		name := "past-redlock-" + mode
		rdb.Set(ctx, n.Keys(name).token, TokenLimit-2, 0)
		for round := range 3 {
			c, err := n.Counter(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			g, err := n.TryAcquire(ctx, name, "h", "", time.Minute, c+1)
			if err != nil {
				if !strings.Contains(err.Error(), pastLimit) {
					t.Fatalf("%s: round %d: %v", name, round, err)
				}
				break
			}
			if !g.Acquired || g.Token != c+1 {
				t.Fatalf("%s: round %d: %+v on a free lock with counter %d; want token %d or an error", name, round, g, c, c+1)
			}
			if _, err := n.releaseReq(ctx, n.Keys(name), "h", g.Token, 1, false, n.NewRequest()); err != nil {
				t.Fatalf("%s: release: %v", name, err)
			}
		}
	}
}

// A counter set negative by hand gave tokens below 1, which the client
// reads as uint64s near 2^64 (and which then fall to 1, 2, …): the hold
// the store kept as "-4" was not the one its holder renewed as
// 18446744073709551612, so its first renewal lost it. An acquire now fails
// saying why.
func TestNegativeTokenCounterIsRefused(t *testing.T) {
	rdb, ns := nodes(t)
	ctx := t.Context()
	for mode, n := range ns {
		for _, kind := range []driver.Kind{driver.Exclusive, driver.Write, driver.Permit} {
			name := fmt.Sprintf("negative-%s-%v", mode, kind)
			k := NewKindKeys(n.prefix, name, kind)
			rdb.Set(ctx, k.token, -5, 0)
			g, err := n.Acquire(ctx, k, "o", "", time.Minute, 1, n.NewRequest(), "")
			if err == nil || !strings.Contains(err.Error(), pastLimit) {
				t.Errorf("%s: acquire with the counter at -5: %+v, %v; want an error saying why", name, g, err)
			}
		}
	}
}
