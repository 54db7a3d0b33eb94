package main

import (
	"context"
	"errors"
	"slices"

	"github.com/dlock/dlock"
)

// optInModes are demo modes that run only when named in --modes.
var optInModes = []string{"multi"}

// itemsPerOrder is how many items an order of mode buys: in multi mode one
// from each of two segments.
func itemsPerOrder(mode string) int {
	if mode == "multi" {
		return 2
	}
	return 1
}

// deductMulti sells one item from each of two segments, or neither: it
// picks the two fullest segments (read without locks: a hint), locks both
// with LockAll, and sells if they are still the fullest, with stock, under
// the locks (see sellPair).
func (in *instance) deductMulti(ctx context.Context, keys []string) (string, error) {
	if len(keys) < 2 {
		return "", errors.New("multi mode needs --segments of at least 2")
	}
	for range 100 { // a hint gone stale under contention: look again
		levels, err := in.levels(ctx, keys)
		if err != nil {
			return "", err
		}
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return levels[b] - levels[a] })
		a, b := order[0], order[1]
		if levels[b] <= 0 {
			return resSoldOut, nil
		}
		g, err := dlock.LockAll(ctx, in.c.Mutex(keys[a]+"/lock", dlock.WithTTL(lockTTL)), in.c.Mutex(keys[b]+"/lock", dlock.WithTTL(lockTTL)))
		if err != nil {
			return "", err
		}
		res, err := in.sellPair(ctx, g, keys, a, b)
		if uerr := g.Unlock(context.WithoutCancel(ctx)); err == nil && uerr != nil {
			err = uerr
		}
		if err != nil || res == resSold {
			return res, err
		}
	}
	return resBusy, nil
}

// sellPair takes one item from each of segments a and b, whose locks g
// holds, if they are still the two fullest: others' stock only falls, so
// two fullest under their own locks keep the segments level (an order
// elsewhere at the same time saw a tie), and a level stock of an even total
// sells out. It answers resSoldOut if they are not (the caller looks again).
func (in *instance) sellPair(ctx context.Context, g *dlock.Group, keys []string, a, b int) (string, error) {
	levels, err := in.levels(ctx, keys)
	if err != nil {
		return "", err
	}
	if levels[a] <= 0 || levels[b] <= 0 {
		return resSoldOut, nil
	}
	for i, v := range levels {
		if i != a && i != b && (v > levels[a] || v > levels[b]) {
			return resSoldOut, nil
		}
	}
	for _, i := range []int{a, b} {
		if err := g.Err(); err != nil { // a lock was lost: write nothing more
			return "", err
		}
		if err := in.st.set(ctx, keys[i], levels[i]-1); err != nil {
			return "", err
		}
	}
	return resSold, nil
}

// levels reads the stock of each segment in keys.
func (in *instance) levels(ctx context.Context, keys []string) ([]int, error) {
	levels := make([]int, len(keys))
	for i, k := range keys {
		v, _, err := in.st.get(ctx, k)
		if err != nil {
			return nil, err
		}
		levels[i] = v
	}
	return levels, nil
}
