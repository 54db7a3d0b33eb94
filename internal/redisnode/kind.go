package redisnode

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// acquireKind runs the acquire script of read-write locks and semaphores
// (see kindscripts.go) for request req; as acquire, with a channel the
// request queues.
func (n *Node) acquireKind(ctx context.Context, k Keys, owner, label string, ttl time.Duration, limit int, req, channel string) (Grant, error) {
	if err := n.settle(ctx, k, owner); err != nil {
		return Grant{}, err
	}
	if k.kind != driver.Permit {
		limit = 0
	}
	v, err := n.call(ctx, kindAcquireScript, k.args, kindLetter(k.kind), owner, ms(ttl), req, channel, label, limit).Slice()
	if err != nil {
		return Grant{}, fmt.Errorf("redislock: acquire %q: %w", k.name, err)
	}
	var r [4]int64
	for i, x := range v {
		var ok bool
		if len(v) != len(r) {
			return Grant{}, fmt.Errorf("redislock: acquire %q: unexpected reply %v", k.name, v)
		}
		if r[i], ok = x.(int64); !ok {
			return Grant{}, fmt.Errorf("redislock: acquire %q: unexpected reply %v", k.name, v)
		}
	}
	if r[0] < 0 {
		return Grant{}, fmt.Errorf("redislock: acquire %q: %w: its live holders use %d permits, this request %d",
			k.name, driver.ErrLimitMismatch, r[1], limit)
	}
	return Grant{Acquired: r[0] == 1, Token: uint64(r[1]), Holds: int(r[2]),
		TTL: time.Duration(max(r[3], 0)) * time.Millisecond}, nil
}

// ForceReleaseKind drops the holds of the read-write lock (kind Shared or
// Write) or the semaphore (Permit) named name with the given tokens (none:
// every hold), whoever holds them, and hands the lock to the waiters at the
// head of its queue.
func (n *Node) ForceReleaseKind(ctx context.Context, name string, kind driver.Kind, tokens []uint64) error {
	if kind == driver.Write {
		kind = driver.Shared
	}
	args := make([]any, len(tokens))
	for i, t := range tokens {
		args[i] = strconv.FormatUint(t, 10)
	}
	if err := n.call(ctx, kindForceScript, NewKindKeys(n.prefix, name, kind).args, args...).Err(); err != nil {
		return fmt.Errorf("redislock: force release %q: %w", name, err)
	}
	return nil
}

// InspectKind describes the read-write lock (kind Shared or Write) or the
// semaphore (Permit) named name: every live hold in Holders, the write hold
// (else the hold with the greatest token) in Owner, Label, Holds, Token and
// TTL, and a semaphore's permit count in Limit.
func (n *Node) InspectKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	if kind == driver.Write {
		kind = driver.Shared
	}
	k := NewKindKeys(n.prefix, name, kind)
	pipe := n.rdb.Pipeline()
	all := pipe.HGetAll(ctx, k.lock)
	exp := pipe.ZRangeWithScores(ctx, k.exp, 0, -1)
	waiters := pipe.LLen(ctx, k.queue)
	clock := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return driver.Info{}, fmt.Errorf("redislock: inspect %q: %w", name, err)
	}
	now := clock.Val().UnixMilli()
	info := driver.Info{Name: name, Kind: kind, Waiters: int(waiters.Val())}
	recs := all.Val()
	for _, z := range exp.Val() {
		id, _ := z.Member.(string)
		left := int64(z.Score) - now
		rec, ok := recs[id]
		if left <= 0 || !ok || id == "" {
			continue // its lease ran out: the next script drops it
		}
		h := driver.Holder{Owner: id[1:], TTL: time.Duration(left) * time.Millisecond}
		switch id[0] {
		case 'r':
			h.Kind = driver.Shared
		case 'w':
			h.Kind = driver.Write
		case 'p':
			h.Kind = driver.Permit
		}
		parts := strings.SplitN(rec, "|", 4)
		if len(parts) == 4 {
			h.Holds, _ = strconv.Atoi(parts[0])
			h.Token, _ = strconv.ParseUint(parts[1], 10, 64)
			h.Label = parts[3]
		}
		info.Holders = append(info.Holders, h)
		if top := info.Held; !top || h.Kind == driver.Write || (info.Kind != driver.Write && h.Token > info.Token) {
			info.Held, info.Owner, info.Label, info.Holds, info.Token, info.TTL = true, h.Owner, h.Label, h.Holds, h.Token, h.TTL
			if h.Kind == driver.Write {
				info.Kind = driver.Write
			}
		}
	}
	if kind == driver.Permit && info.Held { // a limit left by dead holds binds nobody
		info.Limit, _ = strconv.Atoi(recs["\x00n"])
	}
	return info, nil
}
