package redisnode

import (
	"fmt"
	"strings"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// Keys are the Redis keys of one lock, and the kind of hold they are used
// for. They share a hash tag, so in a Cluster they live in one slot and
// every script touches one node; a mutex, a read-write lock and a semaphore
// of one name have keys of their own, in the same slot.
type Keys struct {
	args  []any // the KEYS of every script, as FCALL takes them: their count, then lock, token, queue, info (a mutex); lock, exp, token, queue, info (the kinds)
	kind  driver.Kind
	name  string
	lock  string // mutex: hash of owner -> hold count, "\x00t" -> token, "\x00l" -> label, "\x00r" -> the last requests that changed the hold; kinds: see kindscripts.go
	exp   string // kinds: sorted set of hold -> expiry (ms, server time)
	token string // counter: the last fencing token; outlives the lock
	queue string // list: waiting requests in arrival order
	info  string // hash: request -> its place (expiry, TTL, channel, owner, label; kind and limit for the kinds)
	chann string // mutex: pub/sub channel of releases (for Redlock's waiters)
}

// tagEscaper makes any name safe inside a hash tag: the tag ends at the
// first "}", so braces (and "%", to keep the mapping one-to-one) are
// percent-escaped.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

// tag returns name as it stands in the keys' hash tag; most names need no
// escaping, and then nothing is allocated.
func tag(name string) string {
	if !strings.ContainsAny(name, "%{}") {
		return name
	}
	return tagEscaper.Replace(name)
}

// within returns s[i:i+n] and i+n: the keys of one lock are cut from one
// string, so making them costs one allocation, not one per key.
func within(s string, i, n int) (string, int) { return s[i : i+n], i + n }

// NewKeys returns the keys of the mutex named name.
func NewKeys(prefix, name string) Keys {
	t := tag(name)
	// One string "<base>:token<base>:queueinfo<base>:released", base being
	// "<prefix>:{<tag>}": the lock is the first base, the queue a prefix of
	// the info key.
	b := len(prefix) + len(t) + 3
	all := prefix + ":{" + t + "}:token" + prefix + ":{" + t + "}:queueinfo" + prefix + ":{" + t + "}:released"
	k := Keys{name: name, lock: all[:b]}
	i := 0
	k.token, i = within(all, i, b+len(":token"))
	k.queue = all[i : i+b+len(":queue")]
	k.info, i = within(all, i, b+len(":queueinfo"))
	k.chann, _ = within(all, i, b+len(":released"))
	k.args = []any{4, k.lock, k.token, k.queue, k.info}
	return k
}

// NewKindKeys returns the keys of the lock named name for holds of kind:
// those of the mutex for Exclusive, of the read-write lock for Shared and
// Write ("<prefix>:{<name>}:rw…"), of the semaphore for Permit
// ("<prefix>:{<name>}:sem…").
func NewKindKeys(prefix, name string, kind driver.Kind) Keys {
	fam := ":rw"
	switch kind {
	case driver.Exclusive:
		return NewKeys(prefix, name)
	case driver.Permit:
		fam = ":sem"
	}
	base := prefix + ":{" + tag(name) + "}" + fam
	k := Keys{kind: kind, name: name, lock: base, exp: base + ":exp", token: base + ":token", queue: base + ":queue", info: base + ":queueinfo"}
	k.args = []any{5, k.lock, k.exp, k.token, k.queue, k.info}
	return k
}

// Kind returns the kind of hold the keys are used for.
func (k Keys) Kind() driver.Kind { return k.kind }

// all returns the KEYS of every script, for EVALSHA; FCALL takes k.args,
// boxed once when the keys are made, not on every call.
func (k Keys) all() []string { return keyStrings(k.args) }

// holdID is the field of owner's hold in a read-write lock's or semaphore's
// hash: the kind's letter and the owner id.
func (k Keys) holdID(owner string) string { return kindLetter(k.kind) + owner }

func kindLetter(kind driver.Kind) string {
	switch kind {
	case driver.Shared:
		return "r"
	case driver.Write:
		return "w"
	case driver.Permit:
		return "p"
	}
	return ""
}

// CheckPrefix refuses, with an error wrapping dlock.ErrInvalidConfig, a key prefix that would let one tenant's ACL pattern
// cover another's keys, or that an ACL pattern cannot name: the separator
// ':' (the pattern ~a:* of prefix "a" also covers every key of prefix
// "a:b"), glob characters (* ? [ ] \), which a pattern would read as globs,
// and braces, which would move the lock's keys out of one Cluster slot.
func CheckPrefix(p string) error {
	if i := strings.IndexAny(p, ":*?[]\\{}"); i >= 0 {
		return fmt.Errorf("%w: key prefix %q contains %q: prefixes must not nest (~a:* covers prefix a:b too) "+
			"nor hold ACL glob characters or braces", dlock.ErrInvalidConfig, p, p[i:i+1])
	}
	return nil
}
