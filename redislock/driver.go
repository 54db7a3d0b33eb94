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
	node   *redisnode.Node
	rdb    redis.UniversalClient
	owned  bool // opened from a URL: Close closes rdb
	prefix string
	log    *slog.Logger
	notes  []string
	hub    *hub
	locks  locks // the keys of the locks this client used, and what it added to List's index
}

func newDriver(ctx context.Context, rdb redis.UniversalClient, opts Options, owned bool) (*redisDriver, error) {
	if err := redisnode.CheckPrefix(opts.KeyPrefix); err != nil {
		return nil, fmt.Errorf("redislock: %w", err)
	}
	node := redisnode.New(rdb, opts.KeyPrefix)
	if opts.Eval {
		node.UseEval()
	}
	d := &redisDriver{node: node, rdb: rdb, owned: owned, prefix: node.Prefix(), log: opts.Logger}
	if d.log == nil {
		d.log = slog.Default()
	}
	if opts.fromURL {
		redisnode.RouteLogs(rdb, d.log, opts.addrs...)
	}
	if err := ping(ctx, rdb); err != nil {
		return nil, redisnode.PermissionError(fmt.Errorf("redislock: connect: %w", err), node.Prefix())
	}
	if !node.FollowsContext() {
		d.log.Warn("redislock: the go-redis client ignores context deadlines (ContextTimeoutEnabled is false): " +
			"a renewal cut off by the network waits out ReadTimeout, and a lost lease can be reported after " +
			"another client took the lock; set ContextTimeoutEnabled: true in its options")
	}
	// A user whose ACL lacks SUBSCRIBE or the prefix's channels would see
	// its waiters' subscription refused only inside go-redis, which retries
	// it forever: they would never hear of a release. Subscribe once here.
	if err := checkSubscribe(ctx, rdb, node.Prefix()); err != nil {
		return nil, err
	}
	d.checkEviction(ctx)
	d.hub = newHub(rdb, node.Prefix())
	return d, nil
}

// ping pings rdb, returning when ctx ends even if go-redis goes on: a
// Sentinel client's dials of its sentinels retried for some seconds past
// Open's ctx. Whatever go-redis still does ends when rdb is closed.
func ping(ctx context.Context, rdb redis.UniversalClient) error {
	done := make(chan error, 1)
	go func() { done <- rdb.Ping(ctx).Err() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Migrate loads dlock's function library into the server (see the
// package doc's "Scripts"), unless the client runs its scripts with EVAL.
// It needs +function|load, which workers need not have.
func (d *redisDriver) Migrate(ctx context.Context) error {
	if d.node.UsesEval() {
		return nil
	}
	return d.node.LoadFunctions(ctx)
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
		Reentrant: true, Blocking: true, Kinds: []driver.Kind{driver.Shared, driver.Write, driver.Permit}}
}

// keysOf returns the keys of a held lock, from the entry Acquire kept in
// its handle.
func (d *redisDriver) keysOf(h driver.Held) redisnode.Keys {
	if e, ok := h.Handle.(*lockEntry); ok {
		return e.keys
	}
	return d.lock(h.Name, h.Kind).keys
}

// try runs the acquire script once for request req on lock e; with a
// channel (the hub's), the request queues if the lock is taken.
func (d *redisDriver) try(ctx context.Context, e *lockEntry, r driver.Request, req, channel string) (driver.Grant, error) {
	g, err := d.node.Acquire(ctx, e.keys, r.Owner, r.Label, r.TTL, r.Limit, req, channel)
	if err != nil || !g.Acquired {
		return driver.Grant{Retry: g.TTL}, err
	}
	return driver.Grant{Acquired: true, Token: g.Token, Holds: g.Holds, Validity: min(r.TTL, g.TTL), Handle: e}, nil
}

func (d *redisDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	switch {
	case !d.Caps().Supports(r.Kind):
		return driver.Grant{}, fmt.Errorf("redislock: acquire %q: kind %v: %w", r.Name, r.Kind, dlock.ErrUnsupported)
	case r.Kind == driver.Permit && r.Limit < 1:
		return driver.Grant{}, fmt.Errorf("redislock: acquire %q: %w: a semaphore needs at least 1 permit, not %d", r.Name, dlock.ErrInvalidConfig, r.Limit)
	}
	e := d.lock(r.Name, r.Kind)
	if !r.Wait {
		req := d.node.NewRequest()
		g, err := d.try(ctx, e, r, req, "")
		if err != nil && !errors.Is(err, redisnode.ErrUnsettled) && !errors.Is(err, driver.ErrLimitMismatch) {
			// It may have run and lost its reply: undo a hold (or a
			// re-entry's count) that the caller will never know of. (The
			// other two errors are certain: nothing was sent, or the
			// script refused.)
			d.cancel(ctx, e.keys, r.Owner, req)
		}
		if err == nil && g.Acquired {
			d.index(ctx, e, r.Name, r.Kind)
		}
		return g, redisnode.PermissionError(err, d.prefix)
	}
	g, err := d.wait(ctx, e, r)
	if err == nil && g.Acquired {
		d.index(ctx, e, r.Name, r.Kind)
	}
	return g, redisnode.PermissionError(err, d.prefix)
}

// Renew sends every renewal of the batch in one pipeline (see
// redisnode.Node.RenewMany).
func (d *redisDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	hs := make([]redisnode.Hold, len(batch))
	for i, h := range batch {
		hs[i] = redisnode.Hold{Keys: d.keysOf(h), Owner: h.Owner, Token: h.Token, TTL: h.TTL}
	}
	res := make([]driver.RenewResult, len(batch))
	for i, err := range d.node.RenewMany(ctx, hs) {
		res[i].Err = redisnode.PermissionError(err, d.prefix)
	}
	return res
}

func (d *redisDriver) Release(ctx context.Context, h driver.Held, count int) error {
	_, err := d.node.ReleaseKeys(ctx, d.keysOf(h), h.Owner, h.Token, count, false)
	return redisnode.PermissionError(err, d.prefix)
}

func (d *redisDriver) ForceRelease(ctx context.Context, name string, token uint64) error {
	return redisnode.PermissionError(d.node.ForceRelease(ctx, name, token), d.prefix)
}

// ForceReleaseKind drops every hold of a read-write lock or semaphore,
// whoever holds it.
func (d *redisDriver) ForceReleaseKind(ctx context.Context, name string, kind driver.Kind, tokens []uint64) error {
	return redisnode.PermissionError(d.node.ForceReleaseKind(ctx, name, kind, tokens), d.prefix)
}

func (d *redisDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info, err := d.node.Inspect(ctx, name)
	info.Notes = d.notes
	return info, redisnode.PermissionError(err, d.prefix)
}

// InspectKind describes the read-write lock or semaphore named name, with
// every live hold.
func (d *redisDriver) InspectKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	info, err := d.node.InspectKind(ctx, name, kind)
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

// As sets *redis.UniversalClient targets to the client underneath (and
// *redisDriver ones, for the package's tests).
func (d *redisDriver) As(target any) bool {
	switch p := target.(type) {
	case *redis.UniversalClient:
		*p = d.rdb
		return true
	case **redisDriver: // for the package's tests
		*p = d
		return true
	}
	return false
}

var _ driver.KindInspector = (*redisDriver)(nil)

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

var _ driver.KindForceReleaser = (*redisDriver)(nil)
