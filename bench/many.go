package main

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	dlockredis "github.com/dlock/dlock/redislock"
	"github.com/dlock/dlock/zklock"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// manyResult is the many-leases scenario on one store: n leases held by
// one dlock client while its watchdog renews them.
type manyResult struct {
	Store           string  `json:"store"`
	Leases          int     `json:"leases"`
	TTL             string  `json:"ttl"`
	HeapPerLease    float64 `json:"heap_bytes_per_lease"`
	ExtraGoroutines int     `json:"extra_goroutines"` // the fewest seen while holding: what stays
	PeakGoroutines  int     `json:"peak_goroutines"`  // the most seen: renewal's passing workers
	CallsPerRenewal float64 `json:"store_calls_per_renewal_interval"`
	CPUPct          float64 `json:"client_cpu_pct_of_one_core"`
	// The ranges over the runs, low and high.
	HeapRange  []float64 `json:"heap_range,omitempty"`
	CallsRange []float64 `json:"calls_range,omitempty"`
	CPURange   []float64 `json:"cpu_range,omitempty"`
	Lost       int       `json:"lost"`
	Failed     string    `json:"failed,omitempty"`
}

// counted opens a dlock client whose store calls add to calls.
type counted func(ctx context.Context, calls *atomic.Int64) (*dlock.Client, error)

// manyStores returns, per store, how to open a counted client and the TTL
// to hold leases with.
func manyStores(srv servers, only []string) []struct {
	store string
	ttl   time.Duration
	open  counted
} {
	type entry = struct {
		store string
		ttl   time.Duration
		open  counted
	}
	var out []entry
	for _, store := range only {
		switch store {
		case "redis":
			addr := srv.Redis
			out = append(out, entry{"redis", 3 * time.Second, func(ctx context.Context, calls *atomic.Int64) (*dlock.Client, error) {
				rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
				rdb.AddHook(callCounter{calls})
				return dlockredis.Open(ctx, rdb, dlockredis.Options{CloseClient: true})
			}})
		case "etcd":
			url := srv.Etcd
			out = append(out, entry{"etcd", 3 * time.Second, func(ctx context.Context, calls *atomic.Int64) (*dlock.Client, error) {
				cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
					DialOptions: []grpc.DialOption{
						grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
							calls.Add(1)
							return invoker(ctx, method, req, reply, cc, opts...)
						}),
						grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
							calls.Add(1)
							return streamer(ctx, desc, cc, method, opts...)
						}),
					}})
				if err != nil {
					return nil, err
				}
				return etcdlock.Open(ctx, cli, etcdlock.Options{CloseClient: true})
			}})
		case "zookeeper":
			addr := srv.ZooKeeper
			out = append(out, entry{"zookeeper", 4 * time.Second, func(ctx context.Context, calls *atomic.Int64) (*dlock.Client, error) {
				dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
					c, err := net.DialTimeout(network, address, timeout)
					if err != nil {
						return nil, err
					}
					return writeCounter{c, calls}, nil
				}
				conn, ev, err := zk.Connect([]string{addr}, 4*time.Second, zk.WithLogger(quiet{}), zk.WithDialer(dial))
				if err != nil {
					return nil, err
				}
				return zklock.Open(ctx, conn, zklock.Options{SessionTimeout: 4 * time.Second, Events: ev, CloseConn: true})
			}})
		}
	}
	return out
}

// callCounter counts go-redis commands and pipelines, one call each.
type callCounter struct{ n *atomic.Int64 }

func (callCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// writeCounter counts writes on a ZooKeeper connection: go-zookeeper writes
// each request (and each ping) in one Write.
type writeCounter struct {
	net.Conn
	n *atomic.Int64
}

func (w writeCounter) Write(b []byte) (int, error) { w.n.Add(1); return w.Conn.Write(b) }

// manyLeases takes n leases on one client, holds them for two TTLs while the
// watchdog renews them, and reports heap per lease, extra goroutines, store
// calls per renewal interval (TTL/3) and the client's CPU.
func manyLeases(ctx context.Context, store string, ttl time.Duration, open counted, n int) manyResult {
	res := manyResult{Store: store, Leases: n, TTL: ttl.String()}
	fail := func(err error) manyResult { res.Failed = err.Error(); return res }
	var calls atomic.Int64
	c, err := open(ctx, &calls)
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	if _, err := c.Mutex("bench/many/warm", dlock.WithTTL(ttl)).TryLock(ctx); err != nil { // the client's lazy state
		return fail(err)
	}
	g0, h0 := goroutinesAndHeap()
	leases := make([]*dlock.Lease, n)
	prefix := fmt.Sprintf("bench/many/%d/", time.Now().UnixNano())
	var wg sync.WaitGroup
	var firstErr atomic.Value
	next := atomic.Int64{}
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				l, err := c.Mutex(fmt.Sprintf("%s%d", prefix, i), dlock.WithTTL(ttl)).TryLock(ctx)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				leases[i] = l
			}
		}()
	}
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return fail(err)
	}
	_, h1 := goroutinesAndHeap()
	res.HeapPerLease = float64(int64(h1)-int64(h0)) / float64(n)

	window := 2 * ttl
	calls.Store(0)
	cpu0 := cpuTime()
	lo, hi := runtime.NumGoroutine(), 0
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		g := runtime.NumGoroutine()
		lo, hi = min(lo, g), max(hi, g)
	}
	cpu := cpuTime() - cpu0
	res.ExtraGoroutines, res.PeakGoroutines = lo-g0, hi-g0
	res.CallsPerRenewal = float64(calls.Load()) / (float64(window) / float64(ttl/3))
	res.CPUPct = 100 * cpu.Seconds() / window.Seconds()
	for _, l := range leases {
		select {
		case <-l.Done():
			res.Lost++
		default:
		}
	}
	return res
}

func goroutinesAndHeap() (int, uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return runtime.NumGoroutine(), m.HeapAlloc
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medianMany reports the median of each measure over the runs (a failed
// run is reported as such).
func medianMany(rs []manyResult) manyResult {
	for _, r := range rs {
		if r.Failed != "" {
			return r
		}
	}
	// med returns the median of a measure over the runs, and its range.
	med := func(f func(manyResult) float64) (float64, []float64) {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2], []float64{v[0], v[len(v)-1]}
	}
	out := rs[0]
	out.HeapPerLease, out.HeapRange = med(func(r manyResult) float64 { return r.HeapPerLease })
	g, _ := med(func(r manyResult) float64 { return float64(r.ExtraGoroutines) })
	p, _ := med(func(r manyResult) float64 { return float64(r.PeakGoroutines) })
	out.ExtraGoroutines, out.PeakGoroutines = int(g), int(p)
	out.CallsPerRenewal, out.CallsRange = med(func(r manyResult) float64 { return r.CallsPerRenewal })
	out.CPUPct, out.CPURange = med(func(r manyResult) float64 { return r.CPUPct })
	for _, r := range rs {
		out.Lost = max(out.Lost, r.Lost)
	}
	return out
}
