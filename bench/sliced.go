package main

import (
	"context"
	"fmt"
	"os"
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
func sliced(ctx context.Context, libs []lib, prep func(context.Context, lib) (stepper, error), d time.Duration, failed []error) []run {
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
	for range nSlices {
		for j, step := range steps {
			if step == nil {
				continue
			}
			start := time.Now()
			o, e := step(ctx, d/nSlices)
			spent[j] += time.Since(start)
			ops[j] += o
			errs[j] += e
		}
	}
	rs := make([]run, len(libs))
	for j := range libs {
		if spent[j] > 0 {
			rs[j] = run{ops: float64(ops[j]) / spent[j].Seconds(), errors: errs[j]}
		}
	}
	return rs
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
