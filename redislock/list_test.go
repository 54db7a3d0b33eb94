package redislock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

func TestList(t *testing.T) {
	h := newSingleHarness(t, testserver.Redis(t))
	drivertest.RunList(t, h.NewClient, drivertest.ListCaps{Labels: true, TTL: true, Waiters: true})
}

// TestListCluster lists across the masters of a Cluster: the names land in
// different slots.
func TestListCluster(t *testing.T) {
	var addrs []string
	for _, n := range testserver.RedisCluster(t, 3) {
		addrs = append(addrs, n.Addr())
	}
	drivertest.RunList(t, func(ctx context.Context) (*dlock.Client, error) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
		c, err := redislock.Open(ctx, rdb, redislock.Options{CloseClient: true})
		if err != nil {
			_ = rdb.Close()
		}
		return c, err
	}, drivertest.ListCaps{Labels: true, TTL: true, Waiters: true})
}
