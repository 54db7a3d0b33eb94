package driver

import (
	"context"
	"strings"
)

// Lister is implemented by drivers that can enumerate the locks in their
// store, for operators (dlock ls, dlock top).
type Lister interface {
	// List describes every lock held now whose name starts with prefix
	// ("" for all), in name order, of every kind: a Mutex's hold as Inspect
	// describes it (with Election set for an election's term), a
	// read-write lock or semaphore as KindInspector does (Kind Shared,
	// Write or Permit, with its Holders). A name whose Mutex, read-write
	// lock and semaphore are all held appears three times, in that order.
	// A driver whose store cannot list in its current configuration
	// returns an error wrapping ErrUnsupported that says why.
	List(ctx context.Context, prefix string) ([]Info, error)
}

// ElectionOwnerPrefix starts the owner id of every candidate of package
// dlock's portable election (a lock whose label is the leader's value), so
// that List can tell a term from a Mutex hold on stores without an election
// layout of their own.
const ElectionOwnerPrefix = "election:"

// IsElectionOwner reports whether owner is a portable election candidate's.
func IsElectionOwner(owner string) bool { return strings.HasPrefix(owner, ElectionOwnerPrefix) }

// waitersNote starts the note a Lister adds to an Info whose Waiters it
// cannot count.
const waitersNote = "waiters not counted: "

// WaitersUncounted is the note a Lister adds to each Info when the store
// keeps no record of waiters to count (Waiters is then 0 whoever waits),
// saying why.
func WaitersUncounted(why string) string { return waitersNote + why }

// IsWaitersUncounted reports whether note is a WaitersUncounted note.
func IsWaitersUncounted(note string) bool { return strings.HasPrefix(note, waitersNote) }
