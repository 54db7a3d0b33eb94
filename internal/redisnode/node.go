// Package redisnode runs dlock's lock scripts on one Redis deployment: the
// layout, the Lua scripts, request ids and the undo of uncertain calls
// shared by the Redis backend (package redislock, one Node) and the Redlock
// backend (package redlock, one Node per master). The layout is described in
// package redislock's doc.
package redisnode

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/redis/go-redis/v9"
)

// Node runs dlock's lock scripts on one Redis deployment (a server, a
// Sentinel-managed master or a Cluster). The Redis backend uses one; the
// Redlock backend uses one per independent master, so both share one layout
// and one set of scripts.
type Node struct {
	rdb    redis.UniversalClient
	prefix string
	id     string // prefix of the node's request ids: 128 random bits in base64url, and "." (requestPrefix)
	seq    atomic.Uint64

	eval atomic.Bool // run scripts with EVALSHA, not FCALL (see functions.go)

	mu      sync.Mutex
	pending map[pendingKey][]pendingRelease // failed releases, by lock and owner
}

// DefaultPrefix starts every key when no prefix is given.
const DefaultPrefix = "dlock"

// Timing of the queue, built into the scripts.
const (
	WaiterTTL  = 3 * time.Second // a queue place not refreshed for this long expires
	HandoffTTL = WaiterTTL       // TTL cap of a lock handed to a waiter
)

// New returns a Node over rdb with the key prefix ("" for "dlock").
func New(rdb redis.UniversalClient, keyPrefix string) *Node {
	if keyPrefix == "" {
		keyPrefix = DefaultPrefix
	}
	return &Node{rdb: rdb, prefix: keyPrefix, id: requestPrefix(), pending: map[pendingKey][]pendingRelease{}}
}

// Prefix returns the node's key prefix.
func (n *Node) Prefix() string { return n.prefix }

// Keys returns the keys of the lock named name.
func (n *Node) Keys(name string) Keys { return NewKeys(n.prefix, name) }

// NewRequest returns an id for one acquire or release, unique to this
// node's client: its random id (128 bits, as owner ids; requestPrefix) and a count,
// built in one allocation. Scripts remember the last ids that changed a
// hold, so a script run twice (see scripts.go) acts once; an acquire that
// finds its id there takes the hold as its own, whatever its owner, so ids
// must not meet across clients.
func (n *Node) NewRequest() string {
	var b [56]byte
	return string(strconv.AppendUint(append(b[:0], n.id...), n.seq.Add(1), 10))
}

// requestPrefix is a node's random id, the first part of its request ids:
// 128 bits from crypto/rand in unpadded URL-safe base64 (22 characters, no
// space, which the scripts' lists of ids are separated by) and a '.', so an
// id stays within 32 bytes, one size class of the allocator, for its first
// billion requests (hex took 33 characters before the count, which put
// every id in the 48-byte class).
func requestPrefix() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return base64.RawURLEncoding.EncodeToString(b[:]) + "."
}

// FollowsContext reports whether the node's client follows context
// deadlines, as far as it can see: false for a go-redis Client (single or
// Sentinel-backed) or ClusterClient whose options leave
// ContextTimeoutEnabled off. Such a client ignores the deadline dlock gives
// each renewal, so a renewal sent into a silent network waits out the
// client's ReadTimeout, and loss can be signalled after the lock expired.
func (n *Node) FollowsContext() bool {
	switch c := n.rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Client returns the node's go-redis client.
func (n *Node) Client() redis.UniversalClient { return n.rdb }

// Channel returns the pub/sub channel on which releases of name are
// announced.
func (n *Node) Channel(name string) string { return NewKeys(n.prefix, name).chann }

// Grant is the answer of one node to an acquire.
type Grant struct {
	Acquired bool
	Token    uint64        // the hold's token
	Holds    int           // the owner's hold count
	TTL      time.Duration // the hold's TTL left, or the holder's when not acquired
}

// TryAcquire makes one attempt, without queueing. A token of 0 takes the
// node's next counter value; another is used as the hold's token and raises
// the node's counter to it, and the attempt fails if the node's counter is
// already at or above it (that token was given out). A new hold keeps
// label as its holder's label; a re-entry keeps the first hold's.
func (n *Node) TryAcquire(ctx context.Context, name, owner, label string, ttl time.Duration, token uint64) (Grant, error) {
	return n.TryAcquireReq(ctx, name, owner, label, ttl, token, n.NewRequest())
}

// TryAcquireReq is TryAcquire as request req (from NewRequest), which Cancel
// can undo.
func (n *Node) TryAcquireReq(ctx context.Context, name, owner, label string, ttl time.Duration, token uint64, req string) (Grant, error) {
	return n.acquire(ctx, NewKeys(n.prefix, name), owner, label, ttl, req, "", token)
}

// Acquire runs the acquire script for request req, taking the node's next
// token for a new hold. With a channel, the request queues if the lock is
// taken, and a handoff to it is announced on the channel; its place in the
// queue carries label, so the lock handed to it is labelled as its own. It
// fails with an error wrapping ErrUnsettled, sending nothing, while an
// earlier release or cancel of owner's hold is unconfirmed. For keys of a
// read-write lock or semaphore (NewKindKeys), it asks for a hold of their
// kind; limit is a semaphore's permit count, and an attempt on a semaphore
// whose live holders use another count fails with an error wrapping
// driver.ErrLimitMismatch.
func (n *Node) Acquire(ctx context.Context, k Keys, owner, label string, ttl time.Duration, limit int, req, channel string) (Grant, error) {
	if k.kind != driver.Exclusive {
		return n.acquireKind(ctx, k, owner, label, ttl, limit, req, channel)
	}
	return n.acquire(ctx, k, owner, label, ttl, req, channel, 0)
}

func (n *Node) acquire(ctx context.Context, k Keys, owner, label string, ttl time.Duration, req, channel string, token uint64) (Grant, error) {
	if err := n.settle(ctx, k, owner); err != nil {
		return Grant{}, err
	}
	if token >= TokenLimit {
		return Grant{}, fmt.Errorf("redislock: acquire %q: token %d: %s", k.name, token, pastLimit)
	}
	tok := ""
	if token > 0 {
		tok = strconv.FormatUint(token, 10)
	}
	v, err := n.call(ctx, acquireScript, k.args, owner, ms(ttl), req, tok, channel, label).Result()
	if err != nil {
		return Grant{}, fmt.Errorf("redislock: acquire: %w", err)
	}
	if t, ok := v.(int64); ok { // a new hold
		return Grant{Acquired: true, Token: uint64(t), Holds: 1, TTL: ttl}, nil
	}
	res, ok := v.([]any)
	if !ok || len(res) != 4 {
		return Grant{}, fmt.Errorf("redislock: acquire: unexpected reply %v", v)
	}
	var r [4]int64
	for i, x := range res {
		if r[i], ok = x.(int64); !ok {
			return Grant{}, fmt.Errorf("redislock: acquire: unexpected reply %v", v)
		}
	}
	return Grant{Acquired: r[0] == 1, Token: uint64(r[1]), Holds: int(r[2]),
		TTL: time.Duration(max(r[3], 0)) * time.Millisecond}, nil
}

// Counter returns the node's last token for name (0 if none).
func (n *Node) Counter(ctx context.Context, name string) (uint64, error) {
	v, err := n.rdb.Get(ctx, NewKeys(n.prefix, name).token).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// Renew extends owner's hold with token by ttl; false if it is not held.
func (n *Node) Renew(ctx context.Context, name, owner string, token uint64, ttl time.Duration) (bool, error) {
	v, err := n.call(ctx, renewScript, []any{1, NewKeys(n.prefix, name).lock}, owner, token, ms(ttl)).Int64()
	return v == 1, err
}

// Release drops count holds of owner's hold with token and returns the
// holds left; an error wrapping dlock.ErrLeaseLost if the hold is not there.
// With notify, the release is announced even if no waiter is queued.
func (n *Node) Release(ctx context.Context, name, owner string, token uint64, count int, notify bool) (int, error) {
	return n.ReleaseKeys(ctx, NewKeys(n.prefix, name), owner, token, count, notify)
}

// ReleaseKeys is Release for the lock with keys k. A release that fails
// uncertainly is sent again before owner's next call on k.
func (n *Node) ReleaseKeys(ctx context.Context, k Keys, owner string, token uint64, count int, notify bool) (int, error) {
	if err := n.settle(ctx, k, owner); err != nil {
		return 0, err
	}
	p := pendingRelease{token: token, count: count, notify: notify, req: n.NewRequest()}
	left, err := n.releaseReq(ctx, k, owner, p.token, p.count, p.notify, p.req)
	if err != nil && !errors.Is(err, dlock.ErrLeaseLost) && !errors.Is(err, errForgotten) {
		n.remember(k, owner, p)
	}
	return left, err
}

// releaseReq runs the release script as request req: sent again with the
// same req after its reply was lost, it acts once, or is refused
// (errForgotten) when the hold can no longer tell whether it ran.
func (n *Node) releaseReq(ctx context.Context, k Keys, owner string, token uint64, count int, notify bool, req string) (int, error) {
	flag := "0"
	if notify {
		flag = "1"
	}
	var left int64
	var err error
	if k.kind != driver.Exclusive {
		left, err = n.call(ctx, kindReleaseScript, k.args, k.holdID(owner), count, token, req).Int64()
	} else {
		left, err = n.call(ctx, releaseScript, k.args, owner, count, token, flag, req).Int64()
	}
	if err != nil {
		return 0, fmt.Errorf("redislock: release: %w", err)
	}
	if left == -2 {
		return 0, errForgotten
	}
	if left < 0 {
		return 0, fmt.Errorf("redislock: release: %w: held by another owner or expired", dlock.ErrLeaseLost)
	}
	return int(left), nil
}

// ForceRelease deletes the lock whoever holds it (token 0), or only while
// its holder's token is token, handing it to the next queued waiter.
func (n *Node) ForceRelease(ctx context.Context, name string, token uint64) error {
	tok := ""
	if token != 0 {
		tok = strconv.FormatUint(token, 10)
	}
	if err := n.call(ctx, forceScript, NewKeys(n.prefix, name).args, tok).Err(); err != nil {
		return fmt.Errorf("redislock: force release: %w", err)
	}
	return nil
}

// Hold names a hold to renew.
type Hold struct {
	Name  string
	Owner string
	Token uint64
	TTL   time.Duration
	Keys  Keys // the hold's keys if set (the Redis backend keeps them per hold, of any kind); else a mutex's, from Name
}

// RenewMany renews every hold in one pipeline (in a Cluster, go-redis sends
// one per node) and returns, per hold, nil, an error wrapping
// dlock.ErrLeaseLost if the hold is gone, or another error. Renewals that
// find the script missing (a function library not loaded yet, or NOSCRIPT
// after SCRIPT FLUSH or a failover) are sent again once it is loaded, or
// with EVAL.
func (n *Node) RenewMany(ctx context.Context, holds []Hold) []error {
	// renew queues h's renewal in pipe: the mutex's script, or the kinds'.
	renew := func(pipe redis.Pipeliner, h Hold, eval bool) *redis.Cmd {
		k := h.Keys
		if k.lock == "" {
			k = NewKeys(n.prefix, h.Name)
		}
		s, keys, who := renewScript, []string{k.lock}, h.Owner
		if k.kind != driver.Exclusive {
			s, keys, who = kindRenewScript, []string{k.lock, k.exp}, k.holdID(h.Owner)
		}
		return n.queue(ctx, pipe, s, eval, keys, who, h.Token, ms(h.TTL))
	}
	cmds := make([]*redis.Cmd, len(holds))
	pipe := n.rdb.Pipeline()
	for i, h := range holds {
		cmds[i] = renew(pipe, h, false)
	}
	_, _ = pipe.Exec(ctx)
	var retry []int
	var cause error
	for i, c := range cmds {
		if !redis.HasErrorPrefix(c.Err(), "NOSCRIPT") && !isNoFunction(c.Err()) && !isUnknownCommand(c.Err()) {
			continue
		}
		if len(retry) == 0 && cause == nil {
			var again bool
			if again, cause = n.recover(ctx, c.Err()); again {
				cause = nil
			}
		}
		if cause != nil {
			cmds[i] = redis.NewCmd(ctx)
			cmds[i].SetErr(cause)
			continue
		}
		retry = append(retry, i)
	}
	if len(retry) > 0 {
		pipe = n.rdb.Pipeline()
		for _, i := range retry {
			cmds[i] = renew(pipe, holds[i], true)
		}
		_, _ = pipe.Exec(ctx)
	}
	errs := make([]error, len(holds))
	for i, c := range cmds {
		v, err := c.Int64()
		switch {
		case err != nil:
			errs[i] = fmt.Errorf("redislock: renew: %w", err)
		case v != 1:
			errs[i] = fmt.Errorf("redislock: renew: %w: the key is gone or held by another owner", dlock.ErrLeaseLost)
		}
	}
	return errs
}

// Inspect describes the lock named name on this node.
func (n *Node) Inspect(ctx context.Context, name string) (driver.Info, error) {
	k := NewKeys(n.prefix, name)
	pipe := n.rdb.Pipeline()
	all := pipe.HGetAll(ctx, k.lock)
	pttl := pipe.PTTL(ctx, k.lock)
	waiters := pipe.LLen(ctx, k.queue)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return driver.Info{}, fmt.Errorf("redislock: inspect: %w", err)
	}
	info := driver.Info{Name: name, Waiters: int(waiters.Val())}
	for f, v := range all.Val() {
		switch {
		case f == "\x00t":
			info.Token, _ = strconv.ParseUint(v, 10, 64)
		case f == "\x00l":
			info.Label = v
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
