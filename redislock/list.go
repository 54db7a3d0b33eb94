package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
	"github.com/dlock/dlock/internal/redisnode"
	"github.com/redis/go-redis/v9"
)

// The index of the names that were locked, which List reads instead of
// SCANning the keyspace: SCAN needs a right that ignores key patterns (a
// tenant granted it lists every tenant's key names), and the documented
// tenant ACL does not grant it. The index is the sorted set
// "<prefix>:index" (under the tenant's own key pattern; lock keys are
// "<prefix>:{…}", so it cannot be one): a member per lock, its family's
// letter and the name ("m:NAME" a Mutex or election, "r:NAME" a read-write
// lock, "s:NAME" a semaphore), scored with the time in ms it was last
// added.
//
// A client adds a lock after it acquires it, with ZADD, at most once per
// indexRefresh per name and kind of hold (its entry in the client's locks
// remembers when; a read-write lock's Shared and Write holds add its one
// member each). List inspects
// every member and removes those not held whose score is older than
// indexStale (so twice indexRefresh: every client that took the lock since
// has added it again); it then inspects them once more and adds back any
// that was taken meanwhile, so that a lock acquired while it prunes stays
// listed (its holder's ZADD comes after the acquire, so after the removal,
// or the acquire comes before the second look). Keeping the index is not
// part of holding the lock: a ZADD that fails is logged and the hold kept.
// Locks taken by clients older than the index are not listed until they
// are taken again.
const (
	indexRefresh  = 30 * time.Minute
	indexStale    = 2 * indexRefresh
	indexCacheMax = 10000
)

// indexKey is the key of the index.
func (d *redisDriver) indexKey() string { return d.prefix + ":index" }

// indexLetters are the families' letters in index members.
var indexLetters = map[driver.Kind]string{driver.Exclusive: "m:", driver.Shared: "r:", driver.Write: "r:", driver.Permit: "s:"}

// index adds the lock name of kind, whose entry is e, to the index, unless
// this client did within indexRefresh.
func (d *redisDriver) index(ctx context.Context, e *lockEntry, name string, kind driver.Kind) {
	now := time.Now()
	d.locks.mu.Lock()
	if !e.indexed.IsZero() && now.Sub(e.indexed) < indexRefresh {
		d.locks.mu.Unlock()
		return
	}
	e.indexed = now
	d.locks.mu.Unlock()
	member := indexLetters[kind] + name
	// The hold is taken whatever ctx does now: add it even if ctx just ended.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := d.rdb.ZAdd(ctx, d.indexKey(), redis.Z{Score: float64(now.UnixMilli()), Member: member}).Err(); err != nil {
		// Kept in the entry: warned once per indexRefresh, not per lock.
		d.log.Warn("redislock: could not add the lock to the index that dlock ls reads; the lock is held, but not listed",
			"name", name, "err", redisnode.PermissionError(err, d.prefix))
	}
}

// List implements driver.Lister from the index (see indexRefresh): every
// lock under the prefix, of every kind, each inspected.
func (d *redisDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	zs, err := d.rdb.ZRangeWithScores(ctx, d.indexKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", redisnode.PermissionError(err, d.prefix))
	}
	var (
		refs  []listing.Ref
		stale []listing.Ref
	)
	cut := float64(time.Now().Add(-indexStale).UnixMilli())
	for _, z := range zs {
		m, _ := z.Member.(string)
		if len(m) < 3 {
			continue
		}
		r := listing.Ref{Name: m[2:], Family: driver.Exclusive}
		switch m[:2] {
		case "r:":
			r.Family = driver.Shared
		case "s:":
			r.Family = driver.Permit
		}
		if len(r.Name) < len(prefix) || r.Name[:len(prefix)] != prefix {
			continue
		}
		refs = append(refs, r)
		if z.Score < cut {
			stale = append(stale, r)
		}
	}
	out, err := listing.Inspect(ctx, refs, listing.For(d))
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", err)
	}
	back, err := d.prune(ctx, stale, out)
	if err != nil {
		return nil, fmt.Errorf("redislock: list: %w", err)
	}
	if len(back) > 0 {
		out = append(out, back...)
		listing.Sort(out)
	}
	return out, nil
}

// prune removes the stale members that List found free, looks at them
// once more and adds back (and returns) those held now.
func (d *redisDriver) prune(ctx context.Context, stale []listing.Ref, held []driver.Info) ([]driver.Info, error) {
	isHeld := map[listing.Ref]bool{}
	for _, i := range held {
		r := listing.Ref{Name: i.Name, Family: i.Kind}
		if i.Kind == driver.Write {
			r.Family = driver.Shared
		}
		isHeld[r] = true
	}
	var gone []listing.Ref
	var members []any
	for _, r := range stale {
		if !isHeld[r] {
			gone = append(gone, r)
			members = append(members, indexLetters[r.Family]+r.Name)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	if err := d.rdb.ZRem(ctx, d.indexKey(), members...).Err(); err != nil {
		return nil, redisnode.PermissionError(err, d.prefix)
	}
	back, err := listing.Inspect(ctx, gone, listing.For(d))
	if err != nil {
		return nil, err
	}
	now := float64(time.Now().UnixMilli())
	for _, i := range back {
		member := indexLetters[i.Kind] + i.Name
		if err := d.rdb.ZAdd(ctx, d.indexKey(), redis.Z{Score: now, Member: member}).Err(); err != nil {
			return nil, redisnode.PermissionError(err, d.prefix)
		}
	}
	return back, nil
}
