package main

import (
	"context"
	"fmt"
	"os"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// nSlices is how many turns each library takes in one run of a throughput
// scenario.
const nSlices = 20

// stepper runs a prepared throughput scenario for d and reports the
// operations done and failed.
type stepper func(ctx context.Context, d time.Duration) (ops, errs int64)

// sliced makes one run of a throughput scenario for every library at once:
// each library's contenders are made first, then the libraries take turns
// of d/nSlices each. A drift of the machine's speed (large on a shared VM,
// where separate runs of a few seconds can differ by a quarter) then falls
// on all of them alike, and their ratios hold. A library whose contenders
// cannot be made is marked in failed and skipped.
func sliced(ctx context.Context, srv servers, libs []lib, prep func(context.Context, lib) (stepper, error), d time.Duration, failed []error) []run {
	steps := make([]stepper, len(libs))
	for j, l := range libs {
		if failed[j] != nil {
			continue
		}
		var err error
		if steps[j], err = prep(ctx, l); err != nil {
			failed[j] = err
			fmt.Fprintf(os.Stderr, "  %s failed: %v\n", l.name, err)
		}
	}
	ops, errs := make([]int64, len(libs)), make([]int64, len(libs))
	spent := make([]time.Duration, len(libs))
	// What each library allocated during its turns, and the collector's
	// CPU spent during them (runtime/metrics' estimate): in one process
	// these need not match, which is what this method gets wrong.
	alloc, gcCPU := make([]float64, len(libs)), make([]float64, len(libs))
	srvCPU := make([]time.Duration, len(libs)) // the server's CPU during each library's turns
	var totalAlloc, totalGC float64
	for range nSlices {
		for j, step := range steps {
			if step == nil {
				continue
			}
			a0, g0 := gcSample()
			s0, _ := serverCPU(srv, libs[j].store)
			start := time.Now()
			o, e := step(ctx, d/nSlices)
			spent[j] += time.Since(start)
			s1, _ := serverCPU(srv, libs[j].store)
			srvCPU[j] += s1 - s0
			a1, g1 := gcSample()
			alloc[j] += a1 - a0
			gcCPU[j] += g1 - g0
			totalAlloc += a1 - a0
			totalGC += g1 - g0
			ops[j] += o
			errs[j] += e
		}
	}
	rs := make([]run, len(libs))
	for j, l := range libs {
		if spent[j] > 0 {
			rs[j] = run{ops: float64(ops[j]) / spent[j].Seconds(), errors: errs[j]}
			fmt.Fprintf(os.Stderr, "  %-22s %6.0f B/op: %4.1f%% of the bytes allocated, %4.1f%% of the collector's CPU (%.0f µs/op); server CPU in its turns %.0f µs/op\n",
				l.name, alloc[j]/float64(max(ops[j], 1)), 100*alloc[j]/max(totalAlloc, 1), 100*gcCPU[j]/max(totalGC, 1e-9),
				1e6*gcCPU[j]/float64(max(ops[j], 1)), float64(srvCPU[j].Microseconds())/float64(max(ops[j], 1)))
		}
	}
	return rs
}

// gcSample returns the bytes allocated so far and the CPU seconds the
// collector has used so far.
func gcSample() (allocBytes, gcSeconds float64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()), s[1].Value.Float64()
}

// byStore groups the indexes of libs by store, in order.
func byStore(libs []lib) [][]int {
	var groups [][]int
	for j, l := range libs {
		if n := len(groups); n > 0 && libs[groups[n-1][0]].store == l.store {
			groups[n-1] = append(groups[n-1], j)
			continue
		}
		groups = append(groups, []int{j})
	}
	return groups
}

// throughputPreps are the throughput scenarios a child runs, by name. A
// child of the delayed scenario runs the uncontended one: the delay is in
// the addresses the parent gives it.
var throughputPreps = map[string]func(context.Context, lib) (stepper, error){
	"uncontended": uncontendedPrep, "16 names": distinct16Prep, delayedScenario: uncontendedPrep}

// uncontendedPrep: one contender locking and unlocking one name.
func uncontendedPrep(ctx context.Context, l lib) (stepper, error) {
	c, err := l.new(ctx, fmt.Sprintf("bench/u/%d", time.Now().UnixNano()))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, d time.Duration) (ops, errs int64) {
		for start := time.Now(); time.Since(start) < d; {
			if c.lock(ctx) != nil || c.unlock(ctx) != nil {
				errs++
				continue
			}
			ops++
		}
		return ops, errs
	}, nil
}

// distinct16Prep: 16 contenders, each on its own name.
func distinct16Prep(ctx context.Context, l lib) (stepper, error) {
	cs := make([]locker, 16)
	for i := range cs {
		var err error
		if cs[i], err = l.new(ctx, fmt.Sprintf("bench/d/%d/%d", time.Now().UnixNano(), i)); err != nil {
			return nil, err
		}
	}
	return func(ctx context.Context, d time.Duration) (ops, errs int64) {
		var n, e atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Since(start) < d {
					if c.lock(ctx) != nil || c.unlock(ctx) != nil {
						e.Add(1)
						continue
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return n.Load(), e.Load()
	}, nil
}
