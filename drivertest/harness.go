// Package drivertest is the conformance suite every dlock backend runs
// against a real server of its kind:
//
//	func TestConformance(t *testing.T) { drivertest.Run(t, newHarness) }
//
// The harness opens clients of the store under test and simulates the faults
// the suite needs (a holder's connections cut, a lock removed behind its
// holder's back). Run chooses its sections from what the harness declares:
//
//   - always: the core contract (exclusion, tokens, expiry, renewal, loss,
//     cancellation, re-entry, Close, Inspect), the kinds (read-write locks
//     and semaphores, or ErrUnsupported from each of their methods),
//     leader elections, LockAll and List;
//   - Caps.NoElection and Caps.NoList: a backend that refuses elections or
//     cannot list says why, and the suite checks the refusal
//     (ErrUnsupported) instead of the section: nothing is left out by
//     omission;
//   - DriverHarness: driver-level read-write lock and semaphore tests;
//   - TLSHarness: the TLS section, against a TLS-only server of the store;
//   - ACLHarness: the whole suite again as a user with exactly the grant the
//     package doc gives (section LeastPrivilege).
//
// Those interfaces are a new backend's checklist; the backend's package doc
// must say the same as its Caps.
package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Harness gives the suite access to one store under test.
type Harness interface {
	// NewClient opens a new client of the store, with its own connections,
	// as another process would.
	NewClient(ctx context.Context) (*dlock.Client, error)
	// Cut cuts c's connections as if its process had died or been
	// partitioned away: c can reach the store no more and releases nothing.
	Cut(ctx context.Context, c *dlock.Client) error
	// Caps says what the backend can do.
	Caps() Caps
}

// Caps are the capabilities and timings of a backend under test.
type Caps struct {
	// TTL is the short lease TTL the expiry tests use. Default 500ms.
	TTL time.Duration
	// Slack is how long after a TTL ends a lock may still be held (the
	// store's expiry granularity and detection delays). Default 250ms.
	Slack time.Duration
	// StoreReentrant reports that hold counts live in the store, so re-entry
	// by one owner works across clients (processes).
	StoreReentrant bool
	// EarlyExpiry is how long before its TTL the store may drop a lock
	// (memcached's one-second clock); fixed leases end that much early.
	EarlyExpiry time.Duration
	// ConnBound reports a lock held by a connection (database row and
	// session locks): the server frees it the moment the connection dies,
	// so a holder whose connection was cut learns of it only at its next
	// renewal (within TTL/3), possibly after a waiter got the lock.
	ConnBound bool
	// SessionBound reports a lock that lives while the store's session does
	// (ZooKeeper): Inspect has no time left to report.
	SessionBound bool
	// NoLabels reports a store with no room for a holder label (database
	// row and session locks): Inspect's Label is empty.
	NoLabels bool
	// QueueInStore reports that waiters keep a record in the store (a queue
	// node or key) that Inspect counts in Waiters.
	QueueInStore bool
	// NoElection, when set, is why the backend refuses leader elections
	// (driver.ElectionRefuser): the Election section checks that Campaign
	// says ErrUnsupported instead of electing.
	NoElection string
	// List says what the backend's List reports.
	List ListCaps
	// NoList, when set, is why the backend cannot enumerate its locks: the
	// List section checks that List says ErrUnsupported.
	NoList string
}

// Remover is a Harness that deletes a lock behind its holder's back in a way
// of its own. Without it the suite uses ForceUnlock from a new client.
type Remover interface {
	Harness
	// Remove deletes the lock named name behind its holder's back.
	Remove(ctx context.Context, name string) error
}

// NewHarness makes a harness; it registers its own cleanup with t.
type NewHarness func(ctx context.Context, t *testing.T) (Harness, error)

func (c Caps) withDefaults() Caps {
	if c.TTL <= 0 {
		c.TTL = 500 * time.Millisecond
	}
	if c.Slack <= 0 {
		c.Slack = 250 * time.Millisecond
	}
	return c
}

// ACLHarness is a Harness that can also open clients as a user given
// exactly the grant the backend's package doc tells users to give: Run then
// runs the whole suite again as that user (section LeastPrivilege), which
// proves the documented grant is enough.
type ACLHarness interface {
	Harness
	// LeastPrivilege returns a harness whose clients log in as that user;
	// it registers its own cleanup with t.
	LeastPrivilege(ctx context.Context, t *testing.T) (Harness, error)
}
