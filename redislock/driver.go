package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// redisDriver implements driver.Driver over a go-redis client.
type redisDriver struct {
	rdb    redis.UniversalClient
	owned  bool // opened from a URL: Close closes rdb
	prefix string
	log    *slog.Logger
	notes  []string
	hub    *hub
}

func newDriver(ctx context.Context, rdb redis.UniversalClient, opts Options, owned bool) (*redisDriver, error) {
	d := &redisDriver{rdb: rdb, owned: owned, prefix: opts.KeyPrefix, log: opts.Logger}
	if d.prefix == "" {
		d.prefix = defaultPrefix
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redislock: connect: %w", err)
	}
	d.checkEviction(ctx)
	d.hub = newHub(rdb)
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

// try runs the acquire script once; req is "" for an attempt that does not
// queue.
func (d *redisDriver) try(ctx context.Context, k keys, r driver.Request, req string) (driver.Grant, error) {
	res, err := acquireScript.Run(ctx, d.rdb, k.all(), r.Owner, ms(r.TTL), req).Int64Slice()
	if err != nil {
		return driver.Grant{}, fmt.Errorf("redislock: acquire: %w", err)
	}
	if len(res) != 4 {
		return driver.Grant{}, fmt.Errorf("redislock: acquire: unexpected reply %v", res)
	}
	pttl := time.Duration(max(res[3], 0)) * time.Millisecond
	if res[0] == 0 {
		return driver.Grant{Retry: pttl}, nil
	}
	return driver.Grant{Acquired: true, Token: uint64(res[1]), Holds: int(res[2]), Validity: min(r.TTL, pttl), Handle: k}, nil
}

func (d *redisDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	k := newKeys(d.prefix, r.Name)
	if !r.Wait {
		return d.try(ctx, k, r, "")
	}
	return d.wait(ctx, k, r)
}

// Renew sends every renewal of the batch in one pipeline (in a Cluster,
// go-redis splits it into one pipeline per node). Renewals that meet
// NOSCRIPT (after a SCRIPT FLUSH or a failover) are sent again with EVAL.
func (d *redisDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	cmds := make([]*redis.Cmd, len(batch))
	pipe := d.rdb.Pipeline()
	for i, h := range batch {
		cmds[i] = renewScript.EvalSha(ctx, pipe, []string{d.keysOf(h).lock}, h.Owner, h.Token, ms(h.TTL))
	}
	_, _ = pipe.Exec(ctx)
	var retry []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pipe = d.rdb.Pipeline()
		for _, i := range retry {
			h := batch[i]
			cmds[i] = renewScript.Eval(ctx, pipe, []string{d.keysOf(h).lock}, h.Owner, h.Token, ms(h.TTL))
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, c := range cmds {
		n, err := c.Int64()
		switch {
		case err != nil:
			res[i].Err = fmt.Errorf("redislock: renew: %w", err)
		case n != 1:
			res[i].Err = fmt.Errorf("redislock: renew: %w: the key is gone or held by another owner", dlock.ErrLeaseLost)
		}
	}
	return res
}

func (d *redisDriver) Release(ctx context.Context, h driver.Held, count int) (int, error) {
	k := d.keysOf(h)
	n, err := releaseScript.Run(ctx, d.rdb, k.all(), h.Owner, count, h.Token).Int64()
	if err != nil {
		return 0, fmt.Errorf("redislock: release: %w", err)
	}
	if n < 0 {
		return 0, fmt.Errorf("redislock: release: %w: held by another owner or expired", dlock.ErrLeaseLost)
	}
	return int(n), nil
}

func (d *redisDriver) ForceRelease(ctx context.Context, name string) error {
	k := newKeys(d.prefix, name)
	if err := forceScript.Run(ctx, d.rdb, k.all()).Err(); err != nil {
		return fmt.Errorf("redislock: force release: %w", err)
	}
	return nil
}

func (d *redisDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	k := newKeys(d.prefix, name)
	pipe := d.rdb.Pipeline()
	all := pipe.HGetAll(ctx, k.lock)
	pttl := pipe.PTTL(ctx, k.lock)
	waiters := pipe.LLen(ctx, k.queue)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return driver.Info{}, fmt.Errorf("redislock: inspect: %w", err)
	}
	info := driver.Info{Name: name, Waiters: int(waiters.Val()), Notes: d.notes}
	for f, v := range all.Val() {
		switch {
		case f == "\x00t":
			info.Token, _ = strconv.ParseUint(v, 10, 64)
		case strings.HasPrefix(f, "\x00"):
		default:
			info.Held, info.Owner = true, f
			info.Holds, _ = strconv.Atoi(v)
		}
	}
	if info.Held && pttl.Val() > 0 {
		info.TTL = pttl.Val()
	}
	return info, nil
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
