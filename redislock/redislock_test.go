package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// openURL opens a client of srv, closed when t ends.
func openURL(t *testing.T, srv *testserver.Server) *dlock.Client {
	t.Helper()
	return drivertest.MustOpen(t, "redis://"+srv.Addr())
}

func rawClient(t *testing.T, srv *testserver.Server) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// After SCRIPT FLUSH the scripts are loaded again: renewal (pipelined
// EVALSHA), release and acquire all keep working.
func TestScriptFlushRecovers(t *testing.T) {
	srv := testserver.Redis(t)
	// Renewals are counted, not slept for: a short TTL and a sleep made
	// this test lose its lease to a starved process (physics, not the
	// flush) on a busy machine. The TTL leaves a starved process room.
	renewed := make(chan error, 64)
	c, err := dlock.Open(t.Context(), "redis://"+srv.Addr(), dlock.WithHooks(dlock.Hooks{
		Renewed: func(_ context.Context, e dlock.Event) {
			select {
			case renewed <- e.Err:
			default:
			}
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := t.Context()
	l, err := c.Mutex("flush", dlock.WithTTL(3*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rawClient(t, srv).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for len(renewed) > 0 { // renewals before the flush
		<-renewed
	}
	for i := range 2 { // two renewals after the flush
		select {
		case err := <-renewed:
			if err != nil {
				t.Fatalf("renewal %d after SCRIPT FLUSH failed: %v", i+1, err)
			}
		case <-l.Done():
			t.Fatalf("lease lost after SCRIPT FLUSH: %v", l.Err())
		}
	}
	if l.Err() != nil {
		t.Fatalf("lease lost after SCRIPT FLUSH: %v", l.Err())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rawClient(t, srv).ScriptFlush(ctx)
	if _, err := c.Mutex("flush").TryLock(ctx); err != nil {
		t.Fatalf("TryLock after SCRIPT FLUSH: %v", err)
	}
}

// A holder whose key is deleted with a plain DEL learns of it within one
// renewal interval.
func TestDeletedKeyIsLost(t *testing.T) {
	srv := testserver.Redis(t)
	c := openURL(t, srv)
	ctx := t.Context()
	const ttl = 600 * time.Millisecond
	l, err := c.Mutex("deleted/{braces}", dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := rawClient(t, srv).Keys(ctx, "dlock:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys: %v %v", keys, err)
	}
	if err := rawClient(t, srv).Del(ctx, "dlock:{deleted/%7Bbraces%7D}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), dlock.ErrLeaseLost) {
			t.Fatalf("Err = %v", l.Err())
		}
	case <-time.After(ttl/3 + 200*time.Millisecond):
		t.Fatalf("lease still live a renewal interval after DEL (keys were %v)", keys)
	}
}

// An eviction policy that can drop lock keys is logged and shown by Inspect.
func TestEvictionPolicyWarning(t *testing.T) {
	srv := testserver.Redis(t, "--maxmemory-policy", "volatile-lru")
	c := openURL(t, srv)
	info, err := c.Inspect(t.Context(), "any")
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Notes) != 1 || !strings.Contains(info.Notes[0], "volatile-lru") {
		t.Fatalf("Notes = %q; want an eviction warning", info.Notes)
	}
	safe := openURL(t, testserver.Redis(t))
	if info, _ := safe.Inspect(t.Context(), "any"); len(info.Notes) != 0 {
		t.Fatalf("Notes with noeviction = %q", info.Notes)
	}
}

// Waiters are served in arrival order: with every goroutine re-queueing
// right after its turn, turns go round and counts stay even.
func TestFairAcrossClients(t *testing.T) {
	srv := testserver.Redis(t)
	const clients, perClient = 4, 2
	deadline := time.Now().Add(1500 * time.Millisecond)
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	for i := range clients {
		c := openURL(t, srv)
		for j := range perClient {
			wg.Add(1)
			id := i*perClient + j
			go func() {
				defer wg.Done()
				m := c.Mutex("fair")
				for time.Now().Before(deadline) {
					l, err := m.Lock(t.Context())
					if err != nil {
						t.Error(err)
						return
					}
					time.Sleep(time.Millisecond)
					mu.Lock()
					counts[id]++
					mu.Unlock()
					if err := l.Unlock(t.Context()); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	lo, hi := 1<<30, 0
	for id := range clients * perClient {
		lo, hi = min(lo, counts[id]), max(hi, counts[id])
	}
	t.Logf("acquisitions per goroutine: %v", counts)
	if lo == 0 || float64(hi)/float64(lo) > 1.5 {
		t.Fatalf("unfair: min %d, max %d acquisitions per goroutine", lo, hi)
	}
}

// A waiter that dies while queued does not block the queue: its place
// expires, and a lock handed to it expires after the short handoff TTL.
func TestDeadWaiterDoesNotBlock(t *testing.T) {
	srv := testserver.Redis(t)
	h := newSingleHarness(t, srv)
	ctx := t.Context()
	holder := openURL(t, srv)
	l, err := holder.Mutex("deadwaiter").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dying, err := h.NewClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer dying.Close()
	go func() { _, _ = dying.Mutex("deadwaiter").Lock(ctx) }()
	for { // until the dying waiter is queued
		info, err := holder.Inspect(ctx, "deadwaiter")
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	live := openURL(t, srv)
	got := make(chan error, 1)
	go func() {
		l, err := live.Mutex("deadwaiter").Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // the live waiter queues behind the dying one
	_ = h.Cut(ctx, dying)
	if err := l.Unlock(ctx); err != nil { // hands the lock to the dead waiter
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(7 * time.Second): // place TTL 3s + handoff TTL 3s
		t.Fatal("a dead waiter blocked the queue")
	}
}

func TestOpenURLs(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := t.Context()
	for _, u := range []string{
		"redis://" + srv.Addr(),
		"redis://" + srv.Addr() + "/2?dial_timeout=2s&prefix=myapp",
	} {
		c, err := dlock.Open(ctx, u)
		if err != nil {
			t.Errorf("Open(%q): %v", u, err)
			continue
		}
		_ = c.Close()
	}
	for _, u := range []string{
		"redis://user:s3cret@" + srv.Addr() + "/0?bogus=1",
		"redis://user:s3cret@h1:1,h2:2/0",
		"redis+sentinel://user:s3cret@127.0.0.1:1",
		"redis+cluster://user:s3cret@" + srv.Addr(), // not a cluster
		"redis://user:s3cret@127.0.0.1:1/0?dial_timeout=100ms",
	} {
		_, err := dlock.Open(ctx, u)
		if err == nil {
			t.Errorf("Open(%q) succeeded", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", u, err)
		}
	}
	_, err := dlock.Open(ctx, "redis://user:s3cret@h1:1,h2:2/0")
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("several hosts without cluster/sentinel: %v; want ErrInvalidURL", err)
	}
}

// As reaches the go-redis client underneath, which talks to the same server.
func TestAsRedisClient(t *testing.T) {
	srv := testserver.Redis(t)
	c := openURL(t, srv)
	var rdb redis.UniversalClient
	if !c.As(&rdb) || rdb == nil {
		t.Fatal("As(*redis.UniversalClient) failed")
	}
	l, err := c.Mutex("as").Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(t.Context())
	if n, err := rdb.Exists(t.Context(), "dlock:{as}").Result(); err != nil || n != 1 {
		t.Fatalf("lock key through As client: %d, %v", n, err)
	}
	var other *redis.Client
	if c.As(&other) {
		t.Fatal("As accepted an unsupported target type")
	}
}

func ExampleOpen() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	c, err := redislock.Open(ctx, rdb, redislock.Options{KeyPrefix: "myapp"})
	if err != nil {
		fmt.Println("no redis here:", err != nil)
		return
	}
	defer c.Close()
	l, _ := c.Mutex("orders/sku-42").Lock(ctx)
	defer l.Unlock(ctx)
}

// In a Cluster, names land on different shards, names with braces stay whole
// (their keys share one slot), and one renewal tick covers every shard.
func TestClusterNamesAndBraces(t *testing.T) {
	nodes := testserver.RedisCluster(t, 3)
	ctx := t.Context()
	u := "redis+cluster://" + nodes[0].Addr() + "," + nodes[1].Addr()
	a := drivertest.MustOpen(t, u)
	b := drivertest.MustOpen(t, u)
	var rdb redis.UniversalClient
	a.As(&rdb)
	cc := rdb.(*redis.ClusterClient)
	if !cc.Options().ContextTimeoutEnabled {
		t.Error("a cluster client built from a URL ignores context deadlines")
	}
	shards := map[string]bool{}
	var leases []*dlock.Lease
	for i := range 12 {
		name := fmt.Sprintf("orders/{sku}-%d}{", i)
		l, err := a.Mutex(name, dlock.WithTTL(300*time.Millisecond)).Lock(ctx)
		if err != nil {
			t.Fatalf("Lock(%q): %v", name, err)
		}
		leases = append(leases, l)
		if _, err := b.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock(%q) from another client: %v", name, err)
		}
		slot := cc.ClusterKeySlot(ctx, "dlock:{"+strings.NewReplacer("{", "%7B", "}", "%7D").Replace(name)+"}").Val()
		shards[fmt.Sprint(slot*3/16384)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("12 names all in one third of the slots")
	}
	time.Sleep(700 * time.Millisecond) // renewals across shards
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("%s lost: %v", l.Name(), l.Err())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The Sentinel URL form finds the master through a sentinel and locks on it.
func TestSentinelURL(t *testing.T) {
	master := testserver.Redis(t)
	sentinel := testserver.RedisSentinel(t, master, "mymaster")
	ctx := t.Context()
	c := drivertest.MustOpen(t, "redis+sentinel://"+sentinel.Addr()+"/mymaster?db=1")
	var sc redis.UniversalClient
	if c.As(&sc); !sc.(*redis.Client).Options().ContextTimeoutEnabled {
		t.Error("a sentinel-backed client built from a URL ignores context deadlines")
	}
	l, err := c.Mutex("via-sentinel").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	rdb := redis.NewClient(&redis.Options{Addr: master.Addr(), DB: 1})
	defer rdb.Close()
	if n, err := rdb.Exists(ctx, "dlock:{via-sentinel}").Result(); err != nil || n != 1 {
		t.Fatalf("lock key on the master's db 1: %d, %v", n, err)
	}
	if _, err := dlock.Open(ctx, "redis+sentinel://"+sentinel.Addr()); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Fatalf("sentinel URL without master name: %v", err)
	}
}
