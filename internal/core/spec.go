// Package core is dlock's engine: the one acquire path of every kind of
// lock (acquire.go: enter → re-enter → obtain (attempt, wait, undo:
// wait.go) → grant), the registry of holds (registry.go, releases.go) and
// the leases on them (hold.go), with all of its state package-private.
// Package dlock is its user API: Mutex, RWMutex, Semaphore, Election and
// Lease build a Spec and Opts and call an Engine, and implement Observer to
// turn its events into hooks. Spec holds the rules that belong to a kind
// of lock rather than to a client: which family a request is in, the key
// of its local wait queue, how an owner's holds of one family combine
// (re-entry, the refused upgrade) and what a permit's re-entry must match;
// a new kind of lock changes Spec's methods here, and nothing else in the
// acquire path.
package core

import (
	"errors"
	"fmt"

	"github.com/dlock/dlock/driver"
)

// ErrUpgrade is the error of a write request by an owner holding the read
// lock (package dlock exports it): the upgrade would deadlock.
var ErrUpgrade = errors.New("dlock: read-to-write upgrade refused: it would deadlock")

// ErrRenewalMismatch is the error of a re-entry that asks for renewed
// leases into a fixed hold, or the reverse (package dlock exports it): the
// leases of one hold share its renewal.
var ErrRenewalMismatch = errors.New("dlock: re-entry asks for another renewal than its hold's")

// Spec is what an acquisition asks for: a lock name, the kind of hold, and
// for a permit the semaphore's count.
type Spec struct {
	Name  string
	Kind  driver.Kind // Exclusive, Shared, Write or Permit
	Limit int         // a Semaphore's permit count
}

// QueueKey is the key of the client's local wait queue for s: one per
// family and name, so a release wakes one waiter of that lock per process.
func (s Spec) QueueKey() string {
	if f := s.Kind.Family(); f != driver.FamilyMutex {
		return fmt.Sprintf("%d\x00%s", f, s.Name)
	}
	return s.Name
}

// KindFor is the kind of hold an owner's request for s gets, given holds,
// which reports whether the owner has a live hold of a kind of s's name. A
// read request by an owner holding the write lock re-enters the write hold;
// a write request by an owner holding the read lock is refused with
// ErrUpgrade. Other kinds are what they ask for, and holds is not called.
func (s Spec) KindFor(holds func(driver.Kind) bool) (driver.Kind, error) {
	var other driver.Kind
	switch s.Kind {
	case driver.Shared:
		other = driver.Write
	case driver.Write:
		other = driver.Shared
	default:
		return s.Kind, nil
	}
	switch {
	case !holds(other):
		return s.Kind, nil
	case s.Kind == driver.Shared:
		return driver.Write, nil
	default:
		return 0, ErrUpgrade
	}
}

// CheckReentry refuses the re-entry of a hold made with limit by a request
// for s that asks for another permit count, as the stores that count holds
// refuse it.
func (s Spec) CheckReentry(limit int) error {
	if s.Kind == driver.Permit && s.Limit != limit {
		return fmt.Errorf("%w: the owner's permit is of a semaphore of %d, asked with %d", driver.ErrLimitMismatch, limit, s.Limit)
	}
	return nil
}
