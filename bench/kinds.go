package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
)

// The scenarios of issue #17: read-write locks and semaphores against the
// mutex, on one name, with 16 workers that each hold what they got for
// 1 ms. Each worker has its own dlock client, as a process would.
//
//   - "rw 90% reads": each operation is a read hold with probability 0.9,
//     else a write hold, of one RWMutex; against: every operation a hold
//     of one Mutex.
//   - "semaphore 4 of 16": each operation is one of 4 permits of one
//     Semaphore; against: the Mutex.
//
// Runs alternate between the kind and the mutex, so a drift of the
// machine's speed falls on both; the median run of each is reported.

const (
	kindWorkers = 16
	kindHold    = time.Millisecond
)

// kindResult is one scenario on one store.
type kindResult struct {
	Store     string    `json:"store"`
	Scenario  string    `json:"scenario"`
	MutexOps  float64   `json:"mutex_ops_per_sec"`
	KindOps   float64   `json:"kind_ops_per_sec"`
	MutexRng  []float64 `json:"mutex_ops_range"`
	KindRng   []float64 `json:"kind_ops_range"`
	Ratio     float64   `json:"ratio"`
	Target    float64   `json:"target"`
	Errors    int64     `json:"errors"`
	Failed    string    `json:"failed,omitempty"`
	MaxInside int64     `json:"max_inside"` // most holders of the kind seen at once
}

// opFunc takes one hold for worker i with client c and returns the lease.
type opFunc func(ctx context.Context, c *dlock.Client, name string, rng *rand.Rand) (*dlock.Lease, error)

func mutexOp(ctx context.Context, c *dlock.Client, name string, _ *rand.Rand) (*dlock.Lease, error) {
	return c.Mutex(name).Lock(ctx)
}

func rwOp(ctx context.Context, c *dlock.Client, name string, rng *rand.Rand) (*dlock.Lease, error) {
	if rng.IntN(10) == 0 {
		return c.RWMutex(name).Lock(ctx)
	}
	return c.RWMutex(name).RLock(ctx)
}

func semOp(ctx context.Context, c *dlock.Client, name string, _ *rand.Rand) (*dlock.Lease, error) {
	return c.Semaphore(name, 4).Acquire(ctx)
}

// kindRun runs op on one name with kindWorkers clients for d and returns
// operations per second, errors and the most holders seen at once.
func kindRun(ctx context.Context, open counted, op opFunc, d time.Duration) (float64, int64, int64, error) {
	var calls atomic.Int64
	cs := make([]*dlock.Client, kindWorkers)
	defer func() {
		for _, c := range cs {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range cs {
		var err error
		if cs[i], err = open(ctx, &calls); err != nil {
			return 0, 0, 0, err
		}
	}
	name := fmt.Sprintf("bench/k/%d", time.Now().UnixNano())
	var ops, errs, inside, most atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), uint64(start.UnixNano())))
			for time.Now().Before(deadline) {
				lctx, cancel := context.WithDeadline(ctx, deadline.Add(5*time.Second))
				l, err := op(lctx, c, name, rng)
				cancel()
				if err != nil {
					errs.Add(1)
					continue
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(kindHold)
				inside.Add(-1)
				if err := l.Unlock(ctx); err != nil {
					errs.Add(1)
					continue
				}
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	return float64(ops.Load()) / time.Since(start).Seconds(), errs.Load(), most.Load(), nil
}

// kindScenarios measures the scenarios on every store of only.
func kindScenarios(ctx context.Context, e *env, only []string, d time.Duration, runs int) []kindResult {
	var out []kindResult
	for _, st := range manyStores(e, only) {
		for _, sc := range []struct {
			name   string
			op     opFunc
			target float64
		}{{"rw 90% reads", rwOp, 5}, {"semaphore 4 of 16", semOp, 3.5}} {
			res := kindResult{Store: st.store, Scenario: sc.name, Target: sc.target}
			var mops, kops []float64
			for i := range runs {
				fmt.Fprintf(os.Stderr, "%-10s %-18s run %d/%d…\n", st.store, sc.name, i+1, runs)
				m, me, _, err := kindRun(ctx, st.open, mutexOp, d)
				if err == nil {
					var k float64
					var ke, most int64
					k, ke, most, err = kindRun(ctx, st.open, sc.op, d)
					res.Errors += me + ke
					res.MaxInside = max(res.MaxInside, most)
					mops, kops = append(mops, m), append(kops, k)
				}
				if err != nil {
					res.Failed = err.Error()
					break
				}
			}
			if res.Failed == "" {
				res.MutexOps, res.MutexRng = medianRange(mops)
				res.KindOps, res.KindRng = medianRange(kops)
				res.Ratio = res.KindOps / res.MutexOps
			}
			out = append(out, res)
		}
	}
	return out
}

func medianRange(xs []float64) (float64, []float64) {
	sort.Float64s(xs)
	return xs[len(xs)/2], []float64{xs[0], xs[len(xs)-1]}
}

// printKinds writes the results as a Markdown table.
func printKinds(w io.Writer, rs []kindResult, d time.Duration, runs int) {
	fmt.Fprintf(w, "%d workers, %v hold, %d runs of %v each (median, range)\n\n", kindWorkers, kindHold, runs, d)
	fmt.Fprintln(w, "| store | scenario | mutex ops/s | kind ops/s | ratio | target | most inside | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		if r.Failed != "" {
			fmt.Fprintf(w, "| %s | %s | failed: %s | | | | | |\n", r.Store, r.Scenario, r.Failed)
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %.0f (%.0f–%.0f) | %.0f (%.0f–%.0f) | %.2f× | %.1f× | %d | %d |\n",
			r.Store, r.Scenario, r.MutexOps, r.MutexRng[0], r.MutexRng[1], r.KindOps, r.KindRng[0], r.KindRng[1],
			r.Ratio, r.Target, r.MaxInside, r.Errors)
	}
}
