package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

type redlockDriver struct {
	nodes       []*redisnode.Node
	clients     []redis.UniversalClient
	owned       bool
	quorum      int
	nodeTimeout time.Duration
	prefix      string // the key prefix, for permission errors
}

func newDriver(ctx context.Context, clients []redis.UniversalClient, opts Options) (*redlockDriver, error) {
	addrs := make([]string, len(clients))
	for i, c := range clients {
		if cl, ok := c.(*redis.Client); ok {
			addrs[i] = cl.Options().Addr
		} else {
			addrs[i] = fmt.Sprintf("client %p", c)
		}
	}
	if err := checkNodes(ctx, addrs); err != nil {
		return nil, err
	}
	if err := redisnode.CheckPrefix(opts.KeyPrefix); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	if opts.NodeTimeout != 0 && opts.NodeTimeout < minNodeTimeout {
		return nil, fmt.Errorf("redlock: %w: NodeTimeout %v: want %v or more (or 0 for the default)", dlock.ErrInvalidConfig, opts.NodeTimeout, minNodeTimeout)
	}
	d := &redlockDriver{clients: clients, owned: opts.CloseClients, quorum: len(clients)/2 + 1, nodeTimeout: opts.NodeTimeout,
		prefix: cmp.Or(opts.KeyPrefix, "dlock")}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	for i, c := range clients {
		n := redisnode.New(c, opts.KeyPrefix)
		if opts.Eval {
			n.UseEval()
		}
		if opts.fromURL {
			redisnode.RouteLogs(c, log)
		}
		if !n.FollowsContext() {
			log.Warn("redlock: a node's go-redis client ignores context deadlines (ContextTimeoutEnabled is false): "+
				"the per-node timeout does not bound its socket reads; set ContextTimeoutEnabled: true in its options",
				"node", i, "addr", addrs[i])
		}
		d.nodes = append(d.nodes, n)
	}
	// A quorum that answers is enough: a node down or stopped held every
	// Open (and so every dlock command) for the whole 2 s of each step,
	// and go-redis's redials of a refusing node for longer (3.7–5 s, an
	// adversary pass).
	_, errs := eachUntil(ctx, d, 2*time.Second, d.quorum, func(ctx context.Context, n *redisnode.Node) (struct{}, error) {
		return struct{}{}, n.Client().Ping(ctx).Err()
	})
	if err := d.refused(errs); err != nil {
		return nil, err
	}
	if up := countNil(errs); up < d.quorum {
		return nil, fmt.Errorf("redlock: connect: only %d of %d nodes answered: %w", up, len(d.nodes), errors.Join(errs...))
	}
	// Load the function library now where this user may, so no lock call
	// spends its short per-node timeout on it; a user who may not finds
	// out on its first call (the operator runs dlock migrate).
	// Only where the ping was answered: a node that was not finds the
	// library missing on its first call, and loads it then.
	_, _ = each(ctx, d, 2*time.Second, func(ctx context.Context, n *redisnode.Node) (struct{}, error) {
		if errs[slices.Index(d.nodes, n)] == nil && !n.UsesEval() {
			if err := n.LoadFunctions(ctx); err != nil {
				log.Debug("redlock: not loading the function library", "err", err)
			}
		}
		return struct{}{}, nil
	})
	return d, nil
}

// Migrate loads dlock's function library into every node (see package
// redislock's doc); it needs +function|load.
func (d *redlockDriver) Migrate(ctx context.Context) error {
	_, errs := each(ctx, d, 10*time.Second, func(ctx context.Context, n *redisnode.Node) (struct{}, error) {
		if n.UsesEval() {
			return struct{}{}, nil
		}
		return struct{}{}, n.LoadFunctions(ctx)
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("redlock: migrate: %w", err)
	}
	return nil
}

// timeout is the per-node timeout for a lock of ttl.
func (d *redlockDriver) timeout(ttl time.Duration) time.Duration {
	if d.nodeTimeout > 0 {
		return d.nodeTimeout
	}
	return max(min(ttl/20, 50*time.Millisecond), 2*time.Millisecond)
}

// drift is the specification's allowance for clock drift.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// each runs f on every node at once and returns at timeout even if some
// node has not answered (its error is then a timeout): one slow node must
// not slow the lock.
func each[T any](ctx context.Context, d *redlockDriver, timeout time.Duration, f func(context.Context, *redisnode.Node) (T, error)) ([]T, []error) {
	return eachUntil(ctx, d, timeout, 0, f)
}

// eachUntil is each that also returns once enough nodes (0: all) have
// answered with no error; the others' requests are then cancelled and
// their errors say they did not answer.
func eachUntil[T any](ctx context.Context, d *redlockDriver, timeout time.Duration, enough int, f func(context.Context, *redisnode.Node) (T, error)) ([]T, []error) {
	type answer struct {
		i   int
		v   T
		err error
	}
	answers := make(chan answer, len(d.nodes))
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i, n := range d.nodes {
		go func() {
			v, err := f(ctx, n)
			answers <- answer{i, v, err}
		}()
	}
	res := make([]T, len(d.nodes))
	errs := make([]error, len(d.nodes))
	for i := range errs {
		errs[i] = fmt.Errorf("redlock: node %d: no answer in %v", i, timeout)
	}
	ok := 0
	for range d.nodes {
		select {
		case a := <-answers:
			res[a.i], errs[a.i] = a.v, a.err
			if a.err == nil {
				if ok++; ok == enough {
					return res, errs
				}
			}
		case <-ctx.Done():
			return res, errs
		}
	}
	return res, errs
}

func countNil(errs []error) int {
	n := 0
	for _, e := range errs {
		if e == nil {
			n++
		}
	}
	return n
}

func (d *redlockDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: 10 * time.Millisecond, TTLResolution: time.Millisecond, Reentrant: true,
		KindsNote: kindsNote}
}

// minNodeTimeout is the least node_timeout: below it no node answers in
// time, and every attempt fails ("0 of 3 nodes answered").
const minNodeTimeout = time.Millisecond

// Renew renews every hold of the batch on every node (one pipeline per
// node); a hold keeps its lease while a majority renewed it in time.
func (d *redlockDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	holds := make([]redisnode.Hold, len(batch))
	var longest time.Duration
	for i, h := range batch {
		holds[i] = redisnode.Hold{Name: h.Name, Owner: h.Owner, Token: h.Token, TTL: h.TTL}
		longest = max(longest, h.TTL)
	}
	start := time.Now()
	per, silent := each(ctx, d, d.timeout(longest), func(ctx context.Context, n *redisnode.Node) ([]error, error) {
		return n.RenewMany(ctx, holds), nil
	})
	res := make([]driver.RenewResult, len(batch))
	for i, h := range batch {
		var ok, gone int
		var last error
		for j, errs := range per {
			switch {
			case errs == nil: // no answer in time
				last = silent[j]
			case errs[i] == nil:
				ok++
			case errors.Is(errs[i], dlock.ErrLeaseLost):
				gone++
			default:
				last = errs[i]
			}
		}
		switch {
		case ok >= d.quorum && time.Since(start) < h.TTL-drift(h.TTL):
			res[i].Validity = h.TTL - drift(h.TTL)
		case gone > len(d.nodes)-d.quorum:
			res[i].Err = fmt.Errorf("redlock: %w: held on %d of %d nodes", dlock.ErrLeaseLost, ok, len(d.nodes))
		default:
			res[i].Err = fmt.Errorf("redlock: renew: %d of %d nodes confirmed: %w", ok, len(d.nodes), redisnode.PermissionError(last, d.prefix))
		}
	}
	return res
}

func (d *redlockDriver) Release(ctx context.Context, h driver.Held, count int) error {
	_, errs := each(ctx, d, d.timeout(h.TTL), func(ctx context.Context, n *redisnode.Node) (int, error) {
		return n.Release(ctx, h.Name, h.Owner, h.Token, count, true)
	})
	var held int
	var other error
	for _, err := range errs {
		switch {
		case err == nil:
			held++
		case !errors.Is(err, dlock.ErrLeaseLost):
			other = err
		}
	}
	switch {
	case held >= d.quorum:
		return nil
	case other != nil:
		return fmt.Errorf("redlock: release on %d of %d nodes: %w", held, len(d.nodes), redisnode.PermissionError(other, d.prefix))
	}
	return fmt.Errorf("redlock: release: %w: held on %d of %d nodes", dlock.ErrLeaseLost, held, len(d.nodes))
}

// Inspect reports the holder that a majority of nodes agree on.
func (d *redlockDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	infos, errs := each(ctx, d, time.Second, func(ctx context.Context, n *redisnode.Node) (driver.Info, error) {
		return n.Inspect(ctx, name)
	})
	if err := d.refused(errs); err != nil {
		return driver.Info{}, err
	}
	if up := countNil(errs); up < d.quorum {
		return driver.Info{}, fmt.Errorf("redlock: inspect: only %d of %d nodes answered", up, len(d.nodes))
	}
	type holder struct {
		owner string
		token uint64
	}
	votes := map[holder][]driver.Info{}
	for i, in := range infos {
		if errs[i] == nil && in.Held {
			k := holder{in.Owner, in.Token}
			votes[k] = append(votes[k], in)
		}
	}
	info := driver.Info{Name: name}
	for _, ins := range votes {
		if len(ins) >= d.quorum {
			// One acquire set the token, and the label with it, on every node.
			info.Held, info.Owner, info.Token, info.Holds = true, ins[0].Owner, ins[0].Token, ins[0].Holds
			info.Label = ins[0].Label
			info.TTL = ins[0].TTL
			for _, in := range ins {
				info.TTL = min(info.TTL, in.TTL)
			}
		}
	}
	info.Notes = []string{fmt.Sprintf("%d of %d nodes answered; quorum %d", countNil(errs), len(d.nodes), d.quorum)}
	return info, nil
}

// ForceRelease deletes the lock on every node (one acquire set the same
// token on each), or only where its token is token.
func (d *redlockDriver) ForceRelease(ctx context.Context, name string, token uint64) error {
	_, errs := each(ctx, d, time.Second, func(ctx context.Context, n *redisnode.Node) (struct{}, error) {
		return struct{}{}, n.ForceRelease(ctx, name, token)
	})
	if err := d.refused(errs); err != nil {
		return err
	}
	if up := countNil(errs); up < d.quorum {
		return fmt.Errorf("redlock: force release on %d of %d nodes: %w", up, len(d.nodes), errors.Join(errs...))
	}
	return nil
}

func (d *redlockDriver) Close() error {
	if !d.owned {
		return nil
	}
	var errs []error
	for _, c := range d.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// As sets *[]redis.UniversalClient targets to the nodes' clients.
func (d *redlockDriver) As(target any) bool {
	if p, ok := target.(*[]redis.UniversalClient); ok {
		*p = d.clients
		return true
	}
	return false
}
