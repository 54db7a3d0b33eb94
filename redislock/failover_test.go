package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// replicated is a Redis Cluster of three masters with a replica each, for
// failover tests.
type replicated struct {
	t     *testing.T
	nodes []*testserver.Server
	admin *redis.ClusterClient
}

func newReplicated(t *testing.T) *replicated {
	nodes := testserver.RedisClusterReplicated(t, 3)
	admin := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr(), nodes[1].Addr()}})
	t.Cleanup(func() { _ = admin.Close() })
	return &replicated{t: t, nodes: nodes, admin: admin}
}

func (c *replicated) url() string {
	return fmt.Sprintf("redis+cluster://%s,%s", c.nodes[0].Addr(), c.nodes[1].Addr())
}

// node returns the server listening at addr.
func (c *replicated) node(addr string) *testserver.Server {
	for _, n := range c.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	c.t.Fatalf("no node %s", addr)
	return nil
}

// shard returns the master and the replica serving key's slot.
func (c *replicated) shard(key string) (master, replica string) {
	c.t.Helper()
	ctx := c.t.Context()
	slot, err := c.admin.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	shards, err := c.admin.ClusterShards(ctx).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, s := range shards {
		for _, r := range s.Slots {
			if r.Start <= slot && slot <= r.End {
				for _, n := range s.Nodes {
					if n.Role == "master" {
						master = net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
					}
				}
			}
		}
	}
	// The master's own word for its replica: the other nodes learn of it
	// by gossip, later.
	r := info(ctx, master, "slave0") // ip=127.0.0.1,port=N,state=online,…
	for _, f := range strings.Split(r, ",") {
		if p, ok := strings.CutPrefix(f, "port="); ok {
			return master, "127.0.0.1:" + p
		}
	}
	c.t.Fatalf("slot %d: master %q has no replica (%q): %v", slot, master, r, shards)
	return "", ""
}

// info returns field of INFO replication on addr.
func info(ctx context.Context, addr, field string) string {
	r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond, ReadTimeout: time.Second})
	defer r.Close()
	s, err := r.Info(ctx, "replication").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// caughtUp waits until replica has everything master wrote.
func (c *replicated) caughtUp(master, replica string) {
	c.t.Helper()
	ctx := c.t.Context()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, _ := strconv.Atoi(info(ctx, master, "master_repl_offset"))
		r, _ := strconv.Atoi(info(ctx, replica, "slave_repl_offset"))
		if m > 0 && m == r && info(ctx, replica, "master_link_status") == "up" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("replica %s not caught up with %s: %d of %d", replica, master, r, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// promoted waits until addr is a master.
func (c *replicated) promoted(addr string) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for info(c.t.Context(), addr, "role") != "master" {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not promoted", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterClientsFollowAFailover: when the master that holds a lock is
// killed and its replica (which had the lock) takes over, the holder's
// lease goes on being renewed there and other clients see the lock held.
// A client made from a URL kept go-redis's 60 s between reloads of the
// slot map: its commands went to the dead address for a minute, so the
// holder's renewals failed and its lease was declared lost (an adversary
// pass), and no other client could lock either.
func TestClusterClientsFollowAFailover(t *testing.T) {
	c := newReplicated(t)
	ctx := t.Context()
	holder, other := drivertest.MustOpen(t, c.url()), drivertest.MustOpen(t, c.url())
	const name = "follow"
	ttl := 15 * time.Second // longer than the failover and a reload
	l, err := holder.Mutex(name, dlock.WithTTL(ttl)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v", err)
	}
	master, replica := c.shard("{" + name + "}")
	c.caughtUp(master, replica)
	killed := time.Now()
	c.node(master).Kill()
	c.promoted(replica)
	t.Logf("replica promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
	// The other client hears the lock held, not the dead address.
	for {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := other.Mutex(name).TryLock(tctx)
		cancel()
		if errors.Is(err, dlock.ErrNotAcquired) {
			break
		}
		if err == nil {
			t.Fatal("another client was granted a lock whose holder's lease is live")
		}
		if time.Since(killed) > ttl {
			t.Fatalf("a TTL after the kill, TryLock still says %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The holder's lease outlives the TTL it had when the master died.
	select {
	case <-l.Done():
		t.Fatalf("lease lost after the failover: %v", l.Err())
	case <-time.After(time.Until(killed.Add(ttl + time.Second))):
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after the failover: %v", err)
	}
	l2, err := other.Mutex(name).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the Unlock: %v", err)
	}
	_ = l2.Unlock(ctx)
}

// TestClusterWaiterWhoseChannelNodeIsStopped: a client's first waiter
// does not wait for a subscription its node cannot confirm. The node
// serving the client's handoff channel is stopped (the lock lives on
// another shard); the lock is released to the waiter, which gets it by
// refreshing its place. It waited until its ctx ended.
func TestClusterWaiterWhoseChannelNodeIsStopped(t *testing.T) {
	c := newReplicated(t)
	ctx := t.Context()
	holder, waiter := drivertest.MustOpen(t, c.url()), drivertest.MustOpen(t, c.url())
	chMaster, _ := c.shard(redislock.HandoffChannel(waiter))
	name := ""
	for i := 0; name == ""; i++ {
		if m, _ := c.shard(fmt.Sprintf("{w%d}", i)); m != chMaster {
			name = fmt.Sprintf("w%d", i)
		}
	}
	l, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.node(chMaster).Pause()
	defer c.node(chMaster).Resume()
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		wl, err := waiter.Mutex(name).Lock(wctx)
		if err == nil {
			err = wl.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter queued
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
}
