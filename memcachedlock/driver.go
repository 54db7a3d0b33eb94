package memcachedlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

const (
	resolution = time.Second
	maxTTL     = 30 * 24 * time.Hour // memcached reads longer expirations as Unix times
)

type mcDriver struct {
	mc     *memcache.Client
	prefix string
	owned  bool
}

// value is what a lock item holds.
type value struct {
	Owner string `json:"o"`
	Label string `json:"l,omitempty"` // the first hold's holder label
	Holds int    `json:"n"`
	Token uint64 `json:"t"`
	// First is the token the hold was added with, when latestToken
	// replaced it: Inspect may have shown it, and a force naming it means
	// this hold.
	First   uint64 `json:"f,omitempty"`
	Expires int64  `json:"e"` // Unix ms by the writer's clock: a hint for waiters and Inspect
}

func newDriver(mc *memcache.Client, opts Options) (*mcDriver, error) {
	if err := checkPrefix(opts.KeyPrefix); err != nil {
		return nil, fmt.Errorf("memcachedlock: %w: KeyPrefix %v", dlock.ErrInvalidConfig, err)
	}
	if err := mc.Ping(); err != nil {
		return nil, fmt.Errorf("memcachedlock: connect: %w", err)
	}
	d := &mcDriver{mc: mc, prefix: opts.KeyPrefix, owned: opts.CloseClient}
	if d.prefix == "" {
		d.prefix = "dlock"
	}
	return d, nil
}

// maxPrefix is the longest key prefix: the longest key is a token
// counter's, the prefix, ":", 32 hex digits and ":token", and memcached
// takes keys of at most 250 bytes. (It was the lock key's bound: a prefix
// of 212 to 217 bytes was taken, and every Lock failed on the counter.)
const maxPrefix = 250 - len(":") - 32 - len(tokenSuffix)

// tokenSuffix ends a lock key's token counter key.
const tokenSuffix = ":token"

// checkPrefix says why memcached would refuse keys that start with p, or
// returns nil: a prefix with a space or a control character was taken at
// Open, and then every Lock failed.
func checkPrefix(p string) error {
	if len(p) > maxPrefix {
		return fmt.Errorf("is %d bytes: memcached keys hold at most %d bytes of prefix", len(p), maxPrefix)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f {
			return fmt.Errorf("%q: memcached keys cannot hold spaces or control characters", p)
		}
	}
	return nil
}

// key maps any name to a valid memcached key (≤ 250 bytes, no spaces or
// control characters).
func (d *mcDriver) key(name string) string {
	sum := sha256.Sum256([]byte(name))
	return d.prefix + ":" + hex.EncodeToString(sum[:16])
}

func (d *mcDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: 2 * time.Second, MaxTTL: maxTTL, TTLResolution: resolution, Reentrant: true,
		KindsNote: kindsNote, NoElection: noElection}
}

// validity is how long an item of ttl is sure to live: memcached's clock
// ticks once a second, so it may drop the item up to a second early.
func validity(ttl time.Duration) time.Duration { return ttl - resolution }

func expiration(ttl time.Duration) int32 { return int32(ttl / time.Second) }

// ttlFor is the TTL to write for v's hold when a lease of it asks for ttl:
// never less than what v's last writer set (as far as its clock, in
// v.Expires, tells), rounded up to memcached's whole seconds. Other leases
// of a re-entered hold, maybe in other processes of the owner, count on it,
// and a renewal may land after the release of the hold it renews.
func ttlFor(v value, ttl time.Duration) time.Duration {
	if left := time.Until(time.UnixMilli(v.Expires)); left > ttl {
		return (left + time.Second - 1).Truncate(time.Second)
	}
	return ttl
}

func encode(v value, ttl time.Duration) []byte {
	v.Expires = time.Now().Add(ttl).UnixMilli()
	b, _ := json.Marshal(v)
	return b
}

func decode(it *memcache.Item) (value, error) {
	var v value
	err := json.Unmarshal(it.Value, &v)
	return v, err
}

func (v value) retry() time.Duration {
	return max(time.Until(time.UnixMilli(v.Expires)), 0)
}

// latestToken makes the token of a lock just added above every token taken
// before. Tokens are taken before the add, so a contender that took a later
// one may have held and released the lock between our increment and our
// add. If the counter has moved past tok, the lock (ours: nobody else
// writes it) gets a fresh token. An uncontended lock costs one get.
func (d *mcDriver) latestToken(key string, r driver.Request, tok uint64) (uint64, error) {
	it, err := d.mc.Get(key + tokenSuffix)
	if err != nil {
		return 0, fmt.Errorf("memcachedlock: token: %w", err)
	}
	if n, err := strconv.ParseUint(strings.TrimSpace(string(it.Value)), 10, 64); err == nil && n == tok {
		return tok, nil
	}
	fresh, err := d.nextToken(key)
	if err != nil {
		return 0, fmt.Errorf("memcachedlock: token: %w", err)
	}
	lock, err := d.mc.Get(key)
	if err != nil {
		return 0, fmt.Errorf("memcachedlock: get: %w", err)
	}
	v, err := decode(lock)
	if err != nil || v.Owner != r.Owner || v.Token != tok {
		return 0, fmt.Errorf("memcachedlock: %s changed hands while its token was set", key)
	}
	v.Token, v.First = fresh, tok
	lock.Value = encode(v, r.TTL)
	lock.Expiration = expiration(r.TTL)
	if err := d.mc.CompareAndSwap(lock); err != nil {
		return 0, fmt.Errorf("memcachedlock: cas: %w", err)
	}
	return fresh, nil
}

// nextToken increments the name's counter, creating it at 0 if missing.
func (d *mcDriver) nextToken(key string) (uint64, error) {
	tk := key + tokenSuffix
	n, err := d.mc.Increment(tk, 1)
	if errors.Is(err, memcache.ErrCacheMiss) {
		if err := d.mc.Add(&memcache.Item{Key: tk, Value: []byte("0")}); err != nil && !errors.Is(err, memcache.ErrNotStored) {
			return 0, err
		}
		n, err = d.mc.Increment(tk, 1)
	}
	return n, err
}

func (d *mcDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	if err := ctx.Err(); err != nil {
		return driver.Grant{}, err
	}
	key := d.key(r.Name)
	tok, err := d.nextToken(key)
	if err != nil {
		return driver.Grant{}, fmt.Errorf("memcachedlock: token: %w", err)
	}
	err = d.mc.Add(&memcache.Item{Key: key, Value: encode(value{Owner: r.Owner, Label: r.Label, Holds: 1, Token: tok}, r.TTL), Expiration: expiration(r.TTL)})
	switch {
	case err == nil:
		fresh, err := d.latestToken(key, r, tok)
		if err != nil { // give the lock back rather than leave a hold nobody knows
			_ = d.Release(ctx, driver.Held{Name: r.Name, Owner: r.Owner, TTL: r.TTL, Token: tok}, 1)
			return driver.Grant{}, err
		}
		tok = fresh
		return driver.Grant{Acquired: true, Token: tok, Holds: 1, Validity: validity(r.TTL)}, nil
	case !errors.Is(err, memcache.ErrNotStored):
		return driver.Grant{}, fmt.Errorf("memcachedlock: add: %w", err)
	}
	// Held: by this owner (a re-entry) or another.
	for range 10 {
		it, err := d.mc.Get(key)
		if errors.Is(err, memcache.ErrCacheMiss) {
			return driver.Grant{}, nil // freed just now: the caller tries again
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("memcachedlock: get: %w", err)
		}
		v, err := decode(it)
		if err != nil {
			return driver.Grant{}, fmt.Errorf("memcachedlock: %s holds no lock: %w", key, err)
		}
		if v.Owner != r.Owner {
			return driver.Grant{Retry: v.retry()}, nil
		}
		v.Holds++
		ttl := ttlFor(v, r.TTL)
		it.Value, it.Expiration = encode(v, ttl), expiration(ttl)
		switch err := d.mc.CompareAndSwap(it); {
		case err == nil:
			return driver.Grant{Acquired: true, Token: v.Token, Holds: v.Holds, Validity: validity(r.TTL)}, nil
		case errors.Is(err, memcache.ErrCASConflict), errors.Is(err, memcache.ErrNotStored), errors.Is(err, memcache.ErrCacheMiss):
			continue // changed or deleted meanwhile (an Unlock of the hold): look again
		default:
			return driver.Grant{}, fmt.Errorf("memcachedlock: cas: %w", err)
		}
	}
	return driver.Grant{}, errors.New("memcachedlock: re-entry kept conflicting")
}

// update applies f to the hold's item with gets + cas, retrying on
// conflict. f returns the new value and expiration, or an error wrapping
// ErrLeaseLost.
func (d *mcDriver) update(h driver.Held, f func(value) (value, int32, error)) (value, error) {
	key := d.key(h.Name)
	for range 10 {
		it, err := d.mc.Get(key)
		if errors.Is(err, memcache.ErrCacheMiss) {
			return value{}, fmt.Errorf("memcachedlock: %w: the lock is gone (expired, evicted or the server restarted)", dlock.ErrLeaseLost)
		}
		if err != nil {
			return value{}, err
		}
		v, err := decode(it)
		if err != nil || v.Owner != h.Owner || v.Token != h.Token {
			return value{}, fmt.Errorf("memcachedlock: %w: held by another owner", dlock.ErrLeaseLost)
		}
		nv, exp, err := f(v)
		if err != nil {
			return value{}, err
		}
		it.Value, it.Expiration = encode(nv, time.Duration(max(exp, 0))*time.Second), exp
		switch err := d.mc.CompareAndSwap(it); {
		case err == nil:
			return nv, nil
		case errors.Is(err, memcache.ErrCASConflict):
			continue
		case errors.Is(err, memcache.ErrNotStored), errors.Is(err, memcache.ErrCacheMiss):
			return value{}, fmt.Errorf("memcachedlock: %w: the lock is gone", dlock.ErrLeaseLost)
		default:
			return value{}, err
		}
	}
	return value{}, errors.New("memcachedlock: update kept conflicting")
}

// Renew renews each hold with gets + cas. (Memcached has no batched cas:
// one round trip pair per hold.)
func (d *mcDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	for i, h := range batch {
		if err := ctx.Err(); err != nil {
			res[i].Err = err
			continue
		}
		_, err := d.update(h, func(v value) (value, int32, error) { return v, expiration(ttlFor(v, h.TTL)), nil })
		if err != nil {
			res[i].Err = fmt.Errorf("memcachedlock: renew: %w", err)
		} else {
			res[i].Validity = validity(h.TTL)
		}
	}
	return res
}

func (d *mcDriver) Release(_ context.Context, h driver.Held, count int) error {
	_, err := d.update(h, func(v value) (value, int32, error) {
		v.Holds -= count
		if v.Holds > 0 { // the other holds keep their expiry
			return v, expiration(max(time.Until(time.UnixMilli(v.Expires))+time.Second-1, time.Second)), nil
		}
		return v, -1, nil // a negative expiration drops the item: a delete checked by cas
	})
	if err != nil {
		return fmt.Errorf("memcachedlock: release: %w", err)
	}
	return nil
}

// ForceRelease deletes the lock's item whoever holds it (token 0), or only
// while its holder's token is token (or was, before latestToken replaced
// it within the same grant): a delete checked by cas, as a release's.
func (d *mcDriver) ForceRelease(_ context.Context, name string, token uint64) error {
	if token == 0 {
		if err := d.mc.Delete(d.key(name)); err != nil && !errors.Is(err, memcache.ErrCacheMiss) {
			return fmt.Errorf("memcachedlock: force release: %w", err)
		}
		return nil
	}
	it, err := d.mc.Get(d.key(name))
	if errors.Is(err, memcache.ErrCacheMiss) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("memcachedlock: force release: %w", err)
	}
	if v, err := decode(it); err != nil || (v.Token != token && v.First != token) {
		return nil // another holder, or not a lock of dlock's
	}
	it.Expiration = -1 // a negative expiration drops the item
	err = d.mc.CompareAndSwap(it)
	if err != nil && !errors.Is(err, memcache.ErrCASConflict) && !errors.Is(err, memcache.ErrNotStored) && !errors.Is(err, memcache.ErrCacheMiss) {
		return fmt.Errorf("memcachedlock: force release: %w", err)
	}
	return nil // dropped, or changed since: then another holder's, kept
}

func (d *mcDriver) Inspect(_ context.Context, name string) (driver.Info, error) {
	info := driver.Info{Name: name, Notes: []string{"memcached: tokens reset on restart or eviction; TTL left is the writer's estimate"}}
	it, err := d.mc.Get(d.key(name))
	if errors.Is(err, memcache.ErrCacheMiss) {
		return info, nil
	}
	if err != nil {
		return driver.Info{}, fmt.Errorf("memcachedlock: inspect: %w", err)
	}
	v, err := decode(it)
	if err != nil {
		// Something not dlock's holds the lock's key: it keeps every
		// contender out all the same, and an operator may release it
		// (dlock unlock --force), which needs to see it held.
		info.Held = true
		info.Notes = append(info.Notes, fmt.Sprintf("the item does not hold a dlock value (%v)", err))
		return info, nil
	}
	info.Held, info.Owner, info.Label, info.Holds, info.Token, info.TTL = true, v.Owner, v.Label, v.Holds, v.Token, v.retry()
	return info, nil
}

func (d *mcDriver) Close() error {
	if d.owned {
		return d.mc.Close()
	}
	return nil
}

// As sets **memcache.Client targets.
func (d *mcDriver) As(target any) bool {
	if p, ok := target.(**memcache.Client); ok {
		*p = d.mc
		return true
	}
	return false
}

// noElection is why dlock makes no Election on Memcached.
const noElection = "memcached may evict or lose the leader's key (a restart, memory pressure), which would elect a second leader, and keeps no term across restarts"

// kindsNote is why memcached holds no read-write locks or semaphores.
const kindsNote = "memcached has no server-side scripts and one expiry per item: the readers or permit " +
	"holders of a name, each with a lease of its own, would share one item rewritten by CAS, so a dead " +
	"holder could not expire alone and one eviction would free every hold at once"
