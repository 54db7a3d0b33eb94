package dlock

import (
	"time"

	"github.com/dlock/dlock/driver"
)

// Info describes the state of a lock, as Client.Inspect reports it.
type Info struct {
	Name    string        // the lock name
	Held    bool          // whether anyone holds it
	Owner   string        // the holder's owner id
	Label   string        // the holder's label ("host:pid" unless WithLabel), where the store keeps it
	Holds   int           // the holder's hold count (re-entries)
	Token   uint64        // the holder's fencing token
	TTL     time.Duration // time left on the holder's lease; 0 if unknown
	Waiters int           // waiters queued in the store, where it keeps a queue
	Notes   []string      // backend remarks, such as an eviction-policy warning
	// Kind is the kind of lock described: KindExclusive for a Mutex
	// (Inspect), KindShared or KindWrite for a read-write lock, KindPermit
	// for a semaphore.
	Kind Kind
	// Limit is a semaphore's stored permit count (0 if unknown).
	Limit int
	// Holders lists every live hold of a read-write lock or semaphore; for
	// those, Owner, Label, Holds, Token and TTL describe the write hold if
	// there is one, else the hold with the greatest token.
	Holders []Holder
	// Election reports that the hold is an election's term: Label is then
	// the leader's value and Token its term. List sets it for every
	// election; Inspect only for a portable election's (on a store with an
	// election layout of its own, etcd's or ZooKeeper's, Inspect shows a
	// term as a hold whose Owner is the leader's value, unmarked).
	Election bool
}

// Kind is the kind of a hold: a Mutex's, a read or write hold of an
// RWMutex, or a Semaphore's permit.
type Kind = driver.Kind

// The kinds of holds.
const (
	KindExclusive = driver.Exclusive // a Mutex hold
	KindShared    = driver.Shared    // a read hold of an RWMutex
	KindPermit    = driver.Permit    // a permit of a Semaphore
	KindWrite     = driver.Write     // the write hold of an RWMutex
)

// Holder describes one live hold of a read-write lock or semaphore, in
// Info.Holders: its owner id, label, kind, fencing token, hold count and
// time left (0 if unknown).
type Holder = driver.Holder
