package driver

import "context"

// Elector is implemented by drivers whose store has a leader-election layout
// that other tools share (etcd's client/v3/concurrency Election and
// `etcdctl elect`, Apache Curator's LeaderLatch), so dlock candidates and
// theirs see the same leader. Drivers without it get package dlock's
// portable election: a lock on the election's name, the leader's value kept
// as the hold's label.
//
// A term is a hold like any other: Campaign returns a Grant as Acquire does,
// and dlock renews it with Renew and resigns it with Release, so the
// Handle of a term must be one those accept.
type Elector interface {
	// Campaign makes one attempt (or, with req.Wait, blocks until it leads
	// or ctx ends) at leading the election req.Name, proposing value. The
	// Grant's Token is the term: strictly greater than every earlier term
	// of the election. A Campaign that returns without a grant leaves
	// nothing of the candidate behind in the store.
	Campaign(ctx context.Context, req Request, value string) (Grant, error)
	// Proclaim changes the value of the term h without giving up the lead;
	// it returns ErrLeaseLost if h no longer leads.
	Proclaim(ctx context.Context, h Held, value string) error
	// Leader reads the current leader of the election name; Held false in
	// the result means none.
	Leader(ctx context.Context, name string) (Leader, error)
	// WatchLeader starts watching the election name: the Subscription
	// receives a value (coalesced) after every change of its candidates or
	// of the leader's value. It must be in place when WatchLeader returns.
	WatchLeader(ctx context.Context, name string) (Subscription, error)
}

// Leader describes the leader of an election.
type Leader struct {
	Held  bool   // false: no leader
	Value string // the value the leader proposed or proclaimed
	Label string // the leader's holder label, where the store keeps one apart from the value
	Term  uint64 // the leader's term (its hold's fencing token)
}
