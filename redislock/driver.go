package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// redisDriver implements driver.Driver over a go-redis client.
type redisDriver struct {
	node   *Node
	rdb    redis.UniversalClient
	owned  bool // opened from a URL: Close closes rdb
	prefix string
	log    *slog.Logger
	notes  []string
	hub    *hub
}

func newDriver(ctx context.Context, rdb redis.UniversalClient, opts Options, owned bool) (*redisDriver, error) {
	node := NewNode(rdb, opts.KeyPrefix)
	d := &redisDriver{node: node, rdb: rdb, owned: owned, prefix: node.prefix, log: opts.Logger}
	if d.log == nil {
		d.log = slog.Default()
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, redisnode.PermissionError(fmt.Errorf("redislock: connect: %w", err), node.prefix)
	}
	if !node.FollowsContext() {
		d.log.Warn("redislock: the go-redis client ignores context deadlines (ContextTimeoutEnabled is false): " +
			"a renewal cut off by the network waits out ReadTimeout, and a lost lease can be reported after " +
			"another client took the lock; set ContextTimeoutEnabled: true in its options")
	}
	// A user whose ACL lacks SUBSCRIBE or the prefix's channels would see
	// its waiters' subscription refused only inside go-redis, which retries
	// it forever: they would never hear of a release. Subscribe once here.
	if err := checkSubscribe(ctx, rdb, node.prefix); err != nil {
		return nil, err
	}
	d.checkEviction(ctx)
	d.hub = newHub(rdb, node.prefix)
	return d, nil
}

// checkEviction warns when the server may evict lock keys: every policy but
// noeviction can (volatile-* ones pick among keys with a TTL, as locks have).
// Servers that forbid CONFIG (managed services) are not checked.
func (d *redisDriver) checkEviction(ctx context.Context) {
	res, err := d.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		d.log.Debug("redislock: cannot read maxmemory-policy", "err", err)
		return
	}
	if p := res["maxmemory-policy"]; p != "" && p != "noeviction" {
		note := fmt.Sprintf("maxmemory-policy is %s: Redis may evict lock keys under memory pressure, silently releasing locks; set it to noeviction", p)
		d.notes = append(d.notes, note)
		d.log.Warn("redislock: "+note, "policy", p)
	}
}

func (d *redisDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: time.Millisecond, TTLResolution: time.Millisecond,
		Reentrant: true, Blocking: true}
}

func ms(d time.Duration) int64 { return d.Milliseconds() }

// keysOf returns the keys of a held lock, kept in its handle by Acquire.
func (d *redisDriver) keysOf(h driver.Held) keys {
	if k, ok := h.Handle.(keys); ok {
		return k
	}
	return newKeys(d.prefix, h.Name)
}

// try runs the acquire script once for request req; with a channel (the
// hub's), the request queues if the lock is taken.
func (d *redisDriver) try(ctx context.Context, k keys, r driver.Request, req, channel string) (driver.Grant, error) {
	g, err := d.node.acquire(ctx, k, r.Owner, r.Label, r.TTL, req, channel, 0)
	if err != nil || !g.Acquired {
		return driver.Grant{Retry: g.TTL}, err
	}
	return driver.Grant{Acquired: true, Token: g.Token, Holds: g.Holds, Validity: min(r.TTL, g.TTL), Handle: k}, nil
}

func (d *redisDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	k := newKeys(d.prefix, r.Name)
	if !r.Wait {
		req := d.node.newRequest()
		g, err := d.try(ctx, k, r, req, "")
		if err != nil && !errors.Is(err, errUnsettled) {
			// It may have run and lost its reply: undo a hold (or a
			// re-entry's count) that the caller will never know of.
			d.cancel(ctx, k, r.Owner, req)
		}
		return g, redisnode.PermissionError(err, d.prefix)
	}
	g, err := d.wait(ctx, k, r)
	return g, redisnode.PermissionError(err, d.prefix)
}

// Renew sends every renewal of the batch in one pipeline (see
// Node.RenewMany).
func (d *redisDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	hs := make([]NodeHold, len(batch))
	for i, h := range batch {
		hs[i] = NodeHold{keys: d.keysOf(h), Owner: h.Owner, Token: h.Token, TTL: h.TTL}
	}
	res := make([]driver.RenewResult, len(batch))
	for i, err := range d.node.RenewMany(ctx, hs) {
		res[i].Err = redisnode.PermissionError(err, d.prefix)
	}
	return res
}

func (d *redisDriver) Release(ctx context.Context, h driver.Held, count int) (int, error) {
	n, err := d.node.release(ctx, d.keysOf(h), h.Owner, h.Token, count, false)
	return n, redisnode.PermissionError(err, d.prefix)
}

func (d *redisDriver) ForceRelease(ctx context.Context, name string) error {
	return redisnode.PermissionError(d.node.ForceRelease(ctx, name), d.prefix)
}

func (d *redisDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info, err := d.node.Inspect(ctx, name)
	info.Notes = d.notes
	return info, redisnode.PermissionError(err, d.prefix)
}

func (d *redisDriver) Close() error {
	d.hub.close()
	if d.owned {
		return d.rdb.Close()
	}
	return nil
}

// As sets *redis.UniversalClient targets to the client underneath.
func (d *redisDriver) As(target any) bool {
	if p, ok := target.(*redis.UniversalClient); ok {
		*p = d.rdb
		return true
	}
	return false
}

// checkSubscribe subscribes to a channel of the prefix and waits for the
// server's confirmation, so that a refused SUBSCRIBE fails Open naming
// the missing right. It publishes nothing.
func checkSubscribe(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	ps := rdb.Subscribe(ctx, prefix+":handoffs:open-check")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return redisnode.PermissionError(fmt.Errorf("redislock: connect: subscribe: %w", err), prefix)
	}
	return nil
}
