package redisnode

import "strings"

// Keys are the Redis keys of one lock. They share a hash tag, so in a
// Cluster they live in one slot and every script touches one node.
type Keys struct {
	list  []string // lock, token, queue, info: the KEYS of every script
	lock  string   // hash: owner -> hold count, "\x00t" -> token, "\x00l" -> label, "\x00r" -> the last requests that changed the hold
	token string   // counter: the last fencing token; outlives the lock
	queue string   // list: waiting requests in arrival order
	info  string   // hash: request -> "expiry|ttl|len(channel)|channel owner NUL label"
	chann string   // pub/sub channel of releases and handoffs
}

// tagEscaper makes any name safe inside a hash tag: the tag ends at the
// first "}", so braces (and "%", to keep the mapping one-to-one) are
// percent-escaped.
var tagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func NewKeys(prefix, name string) Keys {
	base := prefix + ":{" + tagEscaper.Replace(name) + "}"
	k := Keys{lock: base, token: base + ":token", queue: base + ":queue", info: base + ":queueinfo", chann: base + ":released"}
	k.list = []string{k.lock, k.token, k.queue, k.info}
	return k
}

func (k Keys) all() []string { return k.list }
