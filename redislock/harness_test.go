package redislock_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// harness runs the conformance suite against one redis-server (or cluster).
type harness struct {
	t *testing.T
	drivertest.Clients
	newRDB func(dial func(context.Context, string, string) (net.Conn, error)) redis.UniversalClient
	admin  redis.UniversalClient
}

func newSingleHarness(t *testing.T, srv *testserver.Server) *harness {
	h := &harness{t: t}
	h.newRDB = func(dial func(context.Context, string, string) (net.Conn, error)) redis.UniversalClient {
		return redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: dial, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	h.admin = h.newRDB(nil)
	t.Cleanup(func() { _ = h.admin.Close() })
	return h
}

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	cu := &drivertest.Cutter{}
	rdb := h.newRDB(cu.Dial)
	c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
	return h.Opened(c, cu, err, func() { _ = rdb.Close() })
}

func (h *harness) Caps() drivertest.Caps {
	return drivertest.Caps{TTL: 500 * time.Millisecond, Slack: 100 * time.Millisecond, StoreReentrant: true, QueueInStore: true,
		List: drivertest.ListCaps{Labels: true, TTL: true, Waiters: true}}
}

// Driver gives the suite c's driver (drivertest.DriverHarness).
func (h *harness) Driver(c *dlock.Client) driver.Driver { return redislock.DriverOf(c) }

// singleHarness is the harness of one redis-server, which the suite also
// reaches over TLS and as a user with the package doc's grant.
type singleHarness struct{ *harness }

func TestConformance(t *testing.T) {
	srv := testserver.Redis(t)
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return singleHarness{newSingleHarness(t, srv)}, nil
	})
}

// TestCluster runs the suite's exclusion and token tests, and the rest of it,
// against a 3-master Redis Cluster, with lock names spread over the slots.
func TestClusterConformance(t *testing.T) {
	nodes := testserver.RedisCluster(t, 3)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.Addr())
	}
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		h := &harness{t: t}
		h.newRDB = func(dial func(context.Context, string, string) (net.Conn, error)) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Dialer: dial, MaxRetries: -1,
				DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		}
		h.admin = h.newRDB(nil)
		t.Cleanup(func() { _ = h.admin.Close() })
		return h, nil
	})
}

// TestSentinelConformance runs the suite through Sentinel: the client finds
// the master by asking a sentinel, as redis+sentinel:// URLs do.
func TestSentinelConformance(t *testing.T) {
	master := testserver.Redis(t)
	sentinel := testserver.RedisSentinel(t, master, "mymaster")
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		h := &harness{t: t}
		h.newRDB = func(dial func(context.Context, string, string) (net.Conn, error)) redis.UniversalClient {
			return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "mymaster",
				SentinelAddrs: []string{sentinel.Addr()}, Dialer: dial, MaxRetries: -1,
				DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		}
		h.admin = h.newRDB(nil)
		t.Cleanup(func() { _ = h.admin.Close() })
		return h, nil
	})
}
