package redisnode

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// grantNode is a Node on a fresh Redis, running its scripts as functions
// (FCALL) or, with eval, as scripts (EVALSHA).
func grantNode(t *testing.T, eval bool) *Node {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testserver.Redis(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	n := New(rdb, "g")
	if eval {
		n.UseEval()
	}
	return n
}

// refused is the Grant of an acquire refused on a free lock: the script's
// {0, 0, 0, PTTL} (PTTL -2: no lock) on both of its paths.
var refused = Grant{}

// The acquire script's grant, shared by its fast path (no lock, no queue)
// and its slow path (a queue key there): a token chosen across nodes
// (Redlock) is taken only above the node's counter, and raises it; one at
// or below it is refused with {0,0,0,pttl}, granting and creating nothing;
// the node's own tokens go on from the highest given out.
func TestGrantTokenChoice(t *testing.T) {
	for _, eval := range []bool{false, true} {
		t.Run(fmt.Sprintf("eval=%v", eval), func(t *testing.T) {
			n := grantNode(t, eval)
			ctx := t.Context()
			const ttl = time.Minute
			for _, path := range []string{"fast", "slow"} {
				name := "tok-" + path
				k := n.Keys(name)
				// an expired place in the queue sends an acquire down the
				// slow path, which drops it; the fast path sees no queue
				expiredPlace := func() {
					if path != "slow" {
						return
					}
					if err := n.rdb.RPush(ctx, k.queue, "gone").Err(); err != nil {
						t.Fatal(err)
					}
					if err := n.rdb.HSet(ctx, k.info, "gone", "1|1000|0|ghost").Err(); err != nil {
						t.Fatal(err)
					}
				}
				acquire := func(owner string, token uint64) Grant {
					t.Helper()
					expiredPlace()
					g, err := n.TryAcquire(ctx, name, owner, "", ttl, token)
					if err != nil {
						t.Fatal(err)
					}
					return g
				}
				release := func(owner string, token uint64) {
					t.Helper()
					if _, err := n.Release(ctx, name, owner, token, 1, false); err != nil {
						t.Fatal(err)
					}
				}
				nothingLeft := func(what string) {
					t.Helper()
					if c, err := n.rdb.Exists(ctx, k.lock, k.queue, k.info).Result(); err != nil || c != 0 {
						t.Fatalf("%s path, after %s: %d of lock, queue, queue info left (%v)", path, what, c, err)
					}
				}

				if g := acquire("a", 5); !g.Acquired || g.Token != 5 || g.Holds != 1 {
					t.Fatalf("%s path: chosen token 5 on a new counter = %+v; want it granted with token 5", path, g)
				}
				release("a", 5)
				for _, tok := range []uint64{5, 3} {
					if g := acquire("b", tok); g != refused {
						t.Fatalf("%s path: chosen token %d at counter 5 = %+v; want %+v", path, tok, g, refused)
					}
					nothingLeft(fmt.Sprintf("token %d refused", tok))
				}
				if c, err := n.Counter(ctx, name); err != nil || c != 5 {
					t.Fatalf("%s path: counter after refusals = %d, %v; want 5", path, c, err)
				}
				if g := acquire("b", 0); !g.Acquired || g.Token != 6 {
					t.Fatalf("%s path: the node's own token after 5 = %+v; want 6", path, g)
				}
				release("b", 6)
				if g := acquire("c", 9); !g.Acquired || g.Token != 9 {
					t.Fatalf("%s path: chosen token 9 at counter 6 = %+v; want it granted with token 9", path, g)
				}
				release("c", 9)
				if g := acquire("d", 0); !g.Acquired || g.Token != 10 {
					t.Fatalf("%s path: the node's own token after a chosen 9 = %+v; want 10", path, g)
				}
				release("d", 10)
				nothingLeft("the last release")
			}
		})
	}
}

// A queued waiter handed the lock gets a token above every one given out,
// whether the release or a chosen-token attempt (Redlock's, which never
// queues) finds the lock free with the waiter first in line; the attempt
// itself is refused and takes nothing.
func TestHandoffTokenAboveChosen(t *testing.T) {
	for _, eval := range []bool{false, true} {
		t.Run(fmt.Sprintf("eval=%v", eval), func(t *testing.T) {
			n := grantNode(t, eval)
			ctx := t.Context()
			const name, ttl = "handoff", time.Minute
			k := n.Keys(name)
			g, err := n.TryAcquire(ctx, name, "a", "", ttl, 7)
			if err != nil || !g.Acquired || g.Token != 7 {
				t.Fatalf("a: %+v, %v", g, err)
			}
			// b queues behind a
			if g, err := n.Acquire(ctx, k, "b", "", ttl, 0, n.NewRequest(), "chan-b"); err != nil || g.Acquired {
				t.Fatalf("b queues: %+v, %v", g, err)
			}
			if _, err := n.Release(ctx, name, "a", 7, 1, false); err != nil {
				t.Fatal(err)
			}
			h, err := n.rdb.HGetAll(ctx, k.lock).Result()
			if err != nil || h["b"] != "1" || h["\x00t"] != "8" {
				t.Fatalf("after a's release: lock %q, %v; want it handed to b with token 8", h, err)
			}
			// c queues behind b; b's hold is deleted (as by expiry): a
			// chosen-token attempt then finds c first in line
			if g, err := n.Acquire(ctx, k, "c", "", ttl, 0, n.NewRequest(), "chan-c"); err != nil || g.Acquired {
				t.Fatalf("c queues: %+v, %v", g, err)
			}
			if err := n.rdb.Del(ctx, k.lock).Err(); err != nil {
				t.Fatal(err)
			}
			if g, err := n.TryAcquire(ctx, name, "r", "", ttl, 20); err != nil || g.Acquired {
				t.Fatalf("a chosen-token attempt with c first in line = %+v, %v; want it refused", g, err)
			}
			h, err = n.rdb.HGetAll(ctx, k.lock).Result()
			if err != nil || h["c"] != "1" || h["\x00t"] != "9" || h["r"] != "" {
				t.Fatalf("after the chosen-token attempt: lock %q, %v; want it handed to c with token 9", h, err)
			}
			if c, err := n.rdb.Exists(ctx, k.queue).Result(); err != nil || c != 0 {
				t.Fatalf("queue left after the last waiter was handed the lock: %d, %v", c, err)
			}
		})
	}
}
