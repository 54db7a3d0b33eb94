package dlock

import "time"

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
}
