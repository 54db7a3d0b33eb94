package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The read-write lock and semaphore scenarios of issue #17 (-kinds): 16
// workers, each with a client of its own (as 16 processes), hold one name
// for 1 ms at a time:
//
//   - rw 90% reads: each hold is a read with probability 0.9, else a write,
//     on an RWMutex; beside it, the same workers on a Mutex;
//   - semaphore 4: each hold is one of 4 permits of a Semaphore; beside it,
//     the same workers on a Mutex.

// kindsNoFsync runs the embedded etcd of -kinds without fsync, to show what
// the recipes do when the disk is not the bound.
var kindsNoFsync = flag.Bool("kinds-nofsync", false, "with -kinds: embedded etcd without fsync")

// kindsOpener opens a dlock client of one store, for one worker.
type kindsOpener func(ctx context.Context) (*dlock.Client, error)

func kindsOpeners(e *env, stores []string) map[string]kindsOpener {
	out := map[string]kindsOpener{}
	for _, s := range stores {
		switch s {
		case "etcd":
			m, err := embedetcd.Start(embedetcd.Options{Dir: e.TempDir(), NoFsync: *kindsNoFsync})
			if err != nil {
				e.Fatalf("embedded etcd: %v", err)
			}
			e.Cleanup(m.Close)
			out[s] = func(ctx context.Context) (*dlock.Client, error) {
				cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
				if err != nil {
					return nil, err
				}
				c, err := etcdlock.Open(ctx, cli, etcdlock.Options{CloseClient: true})
				if err != nil {
					_ = cli.Close()
				}
				return c, err
			}
		case "zookeeper":
			addr := testserver.ZooKeeper(e).Addr()
			out[s] = func(ctx context.Context) (*dlock.Client, error) {
				conn, ev, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(quiet{}))
				if err != nil {
					return nil, err
				}
				c, err := zklock.Open(ctx, conn, zklock.Options{SessionTimeout: 4 * time.Second, Events: ev, CloseConn: true})
				if err != nil {
					conn.Close()
				}
				return c, err
			}
		default:
			fmt.Fprintf(os.Stderr, "-kinds: %s skipped (etcd and zookeeper only)\n", s)
		}
	}
	return out
}

// kindsHold takes one hold for worker w (rng its own) and returns its lease.
type kindsHold func(ctx context.Context, c *dlock.Client, rng *rand.Rand) (*dlock.Lease, error)

// kindsRun runs 16 workers for d and returns holds per second and the most
// holders seen inside at once.
func kindsRun(ctx context.Context, clients []*dlock.Client, hold kindsHold, d time.Duration) (float64, int32, int64) {
	var (
		total, errs  atomic.Int64
		inside, most atomic.Int32
		wg           sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	start := time.Now()
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for time.Now().Before(deadline) {
				lctx, cancel := context.WithDeadline(ctx, deadline.Add(10*time.Second))
				l, err := hold(lctx, c, rng)
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs.Add(1)
				}
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(total.Load()) / time.Since(start).Seconds(), most.Load(), errs.Load()
}

// kindsMain runs the scenarios on each store and prints a table.
func kindsMain(ctx context.Context, e *env, stores []string, d time.Duration, runs int) {
	const workers = 16
	mutex := func(name string) kindsHold {
		return func(ctx context.Context, c *dlock.Client, _ *rand.Rand) (*dlock.Lease, error) {
			return c.Mutex(name).Lock(ctx)
		}
	}
	rw := func(name string) kindsHold {
		return func(ctx context.Context, c *dlock.Client, rng *rand.Rand) (*dlock.Lease, error) {
			if rng.IntN(10) == 0 {
				return c.RWMutex(name).Lock(ctx)
			}
			return c.RWMutex(name).RLock(ctx)
		}
	}
	sem := func(name string) kindsHold {
		return func(ctx context.Context, c *dlock.Client, _ *rand.Rand) (*dlock.Lease, error) {
			return c.Semaphore(name, 4).Acquire(ctx)
		}
	}
	scenarios := []struct {
		name string
		hold func(name string) kindsHold
	}{{"mutex", mutex}, {"rw 90% reads", rw}, {"semaphore 4", sem}}
	fmt.Printf("| store | scenario (16 workers, 1 ms hold) | holds/s (median of %d) | range | × mutex | most inside | errors |\n|---|---|---:|---|---:|---:|---:|\n", runs)
	for _, store := range stores {
		open := kindsOpeners(e, []string{store})[store]
		if open == nil {
			continue
		}
		clients := make([]*dlock.Client, workers)
		for i := range clients {
			c, err := open(ctx)
			if err != nil {
				e.Fatalf("%s: %v", store, err)
			}
			e.Cleanup(func() { _ = c.Close() })
			clients[i] = c
		}
		// Warm up (the JVM behind ZooKeeper runs faster once warm).
		for _, sc := range scenarios {
			kindsRun(ctx, clients, sc.hold(fmt.Sprintf("bench/kinds/warm/%d", time.Now().UnixNano())), d/2)
		}
		ops := make([][]float64, len(scenarios))
		mosts := make([]int32, len(scenarios))
		errs := make([]int64, len(scenarios))
		for r := range runs {
			for i, sc := range scenarios { // alternate, so a drift of the machine falls on all alike
				fmt.Fprintf(os.Stderr, "%-10s %-14s run %d/%d…\n", store, sc.name, r+1, runs)
				o, m, n := kindsRun(ctx, clients, sc.hold(fmt.Sprintf("bench/kinds/%d", time.Now().UnixNano())), d)
				ops[i] = append(ops[i], o)
				mosts[i] = max(mosts[i], m)
				errs[i] += n
			}
		}
		med := make([]float64, len(scenarios))
		for i := range scenarios {
			slices.Sort(ops[i])
			med[i] = ops[i][len(ops[i])/2]
		}
		for i, sc := range scenarios {
			fmt.Printf("| %s | %s | %.0f | %.0f–%.0f | %.2f | %d | %d |\n", store, sc.name, med[i], ops[i][0], ops[i][len(ops[i])-1], med[i]/med[0], mosts[i], errs[i])
		}
	}
}
