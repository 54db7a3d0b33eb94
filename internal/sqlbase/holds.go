// Package sqlbase is what the two SQL backends, pglock and mysqllock, share
// beyond their SQL: the table modes' record of holds whose release failed,
// and the bounds the row and session modes put on a holding connection.
package sqlbase

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Holds records, per (name, owner), what a table-mode client holds in the
// store: the token, how many holds it believes it has, and how many holds it
// gave up although their release failed with an uncertain error (the
// store was down, the connection broke). The store may still count those;
// if nothing settled them, the owner's next Lock would re-enter the row with
// the old token, each re-entry would refresh it, and no other owner would
// get the lock again. So the next statement on the hold settles them first:
// it drops the pending holds, but never below the holds the client still
// believes it has (a release whose outcome was unknown may have been
// applied after all).
//
// Each release carries an id of its own (Drop), which the store keeps
// in the row with the last few (KeptDrops) it applied to it; a settle sends
// the ids of the releases it settles again, and the store applies only
// those it has not applied yet, and lists only ids it did not list (a
// statement re-sends every pending id of its client, and would otherwise
// fill the list with copies). So a release whose reply was lost after it
// was applied is not applied twice when settled, which matters when one
// owner id is shared by several processes: the row's holds are theirs
// too, and a floor of this client's holds would not keep them.
//
// A Holds is safe for concurrent use. The zero value is ready.
//
// Every release and settle carries that floor: the holds the client
// believes it still has once the statement is done. A statement whose ctx
// ended may still reach the store later (held in the network, or run by a
// server that has not yet seen the connection drop), after later
// statements settled it; its id, listed, makes it do nothing, and should
// the id have fallen off the list, its floor keeps it from taking the row
// below the holds the client had when it was sent. A floor never raises
// the row (it keeps at least the floor, or what the row has if less): a
// late release whose floor was above the row raised it to a hold of
// nobody's, which every re-entry of the owner refreshed.
//
// The floor counts the holds believed, so no other statement of the owner
// may change them while a release or settle is in flight: on its (name,
// owner) a release or settle runs alone, and acquires run side by side
// (each takes the pair's gate: Enter for an acquire, Drop and Settle
// alone).
type Holds struct {
	mu    sync.Mutex
	m     map[holdKey]*holdState
	gates map[holdKey]*gate
}

// gate orders one (name, owner)'s statements: settles alone, the rest side
// by side. Waiting for it follows the caller's ctx. refs counts its users,
// so that an unused gate is forgotten.
type gate struct {
	sem  *semaphore.Weighted
	refs int
}

// gateAlone is a settle's weight on a gate: all of it. Any other statement
// weighs 1; waiters are served in order, so a settle is not starved.
const gateAlone = 1 << 30

// gate returns k's gate, counting one more user of it.
func (h *Holds) gate(k holdKey) *gate {
	h.mu.Lock()
	defer h.mu.Unlock()
	g := h.gates[k]
	if g == nil {
		if h.gates == nil {
			h.gates = map[holdKey]*gate{}
		}
		g = &gate{sem: semaphore.NewWeighted(gateAlone)}
		h.gates[k] = g
	}
	g.refs++
	return g
}

// ungate counts one user of k's gate fewer.
func (h *Holds) ungate(k holdKey, g *gate) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if g.refs--; g.refs == 0 {
		delete(h.gates, k)
	}
}

// pass takes k's gate with weight w (1, or gateAlone), waiting until ctx
// ends at most; the returned function gives it back.
func (h *Holds) pass(ctx context.Context, k holdKey, w int64) (func(), error) {
	g := h.gate(k)
	if err := g.sem.Acquire(ctx, w); err != nil {
		h.ungate(k, g)
		return nil, err
	}
	return func() {
		g.sem.Release(w)
		h.ungate(k, g)
	}, nil
}

// Enter is taken around an acquire statement of (name, owner) and the
// Granted that records its grant, after Settle: no settle of the pair runs
// meanwhile. It waits until ctx ends at most; the returned function ends
// it.
func (h *Holds) Enter(ctx context.Context, name, owner string) (func(), error) {
	return h.pass(ctx, holdKey{name, owner}, 1)
}

type holdKey struct{ name, owner string }

type holdState struct {
	token    uint64
	believed int           // holds granted and not given up
	pending  []Drop        // releases that failed: they may not have been applied
	ttl      time.Duration // of the failed release
	failed   time.Time     // when a release last failed
}

// Settle is what one release statement applies to the row of (name, owner,
// Token): each of Drops that the row has not applied yet, but keeping at
// least Floor holds (the row is deleted when the result is 0); the row then
// records the Drops' ids as applied.
type Settle struct {
	Token uint64
	Drops []Drop
	Floor int
}

// Drop is one release: its id and how many holds it gives up.
type Drop struct {
	ID    string // DropIDLen hex digits
	Count int
}

// DropIDLen is the length of a Drop's id: 64 random bits in hex.
const DropIDLen = 16

// KeptDrops is how many ids of applied Drops a row keeps, the latest. A
// settle of a release whose id has fallen off is applied again, so the
// floor still guards the client's own holds.
const KeptDrops = 32

// newDropID returns a fresh Drop id.
func newDropID() string {
	var b [DropIDLen / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}

// IDs returns the Drops' ids, in order.
func (s Settle) IDs() []string {
	ids := make([]string, len(s.Drops))
	for i, d := range s.Drops {
		ids[i] = d.ID
	}
	return ids
}

// Counts returns the Drops' counts, in order.
func (s Settle) Counts() []int {
	n := make([]int, len(s.Drops))
	for i, d := range s.Drops {
		n[i] = d.Count
	}
	return n
}

// Outcome is what a release or settle statement found.
type Outcome int

// The outcomes.
const (
	Applied   Outcome = iota // the statement was applied
	Gone                     // no live row of that owner and token
	Uncertain                // the statement failed: it may or may not have been applied
)

// pending returns the settle owed on (name, owner) before a new acquire, if
// a release failed.
func (h *Holds) pending(name, owner string) (Settle, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[holdKey{name, owner}]
	if st == nil || len(st.pending) == 0 {
		return Settle{}, false
	}
	return Settle{Token: st.token, Drops: append([]Drop(nil), st.pending...), Floor: st.believed}, true
}

// settled records the outcome of a settle from pending.
func (h *Holds) settled(name, owner string, s Settle, o Outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := holdKey{name, owner}
	st := h.m[k]
	if st == nil || st.token != s.Token {
		return
	}
	switch o {
	case Gone:
		delete(h.m, k)
	case Applied:
		st.pending = without(st.pending, s.Drops)
		h.drop(k, st)
	}
}

// without returns the drops of ds that are not in applied (by id).
func without(ds, applied []Drop) []Drop {
	kept := ds[:0:0]
	for _, d := range ds {
		found := false
		for _, a := range applied {
			if a.ID == d.ID {
				found = true
				break
			}
		}
		if !found {
			kept = append(kept, d)
		}
	}
	return kept
}

// Granted records a grant (or a re-entry) of token.
func (h *Holds) Granted(name, owner string, token uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := holdKey{name, owner}
	if st := h.m[k]; st != nil && st.token == token {
		st.believed++
		return
	}
	if h.m == nil {
		h.m = map[holdKey]*holdState{}
	}
	h.m[k] = &holdState{token: token, believed: 1}
}

// release returns the settle that releasing count holds of token applies:
// those and any pending, keeping the holds the client still believes it
// has besides them (see Holds).
func (h *Holds) release(name, owner string, token uint64, count int) Settle {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Settle{Token: token, Drops: []Drop{{ID: newDropID(), Count: count}}}
	if st := h.m[holdKey{name, owner}]; st != nil && st.token == token {
		s.Drops = append(s.Drops, st.pending...)
		s.Floor = max(st.believed-count, 0)
	}
	return s
}

// released records the outcome of a release of count holds done with s
// (from release).
func (h *Holds) released(name, owner string, count int, s Settle, o Outcome, ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := holdKey{name, owner}
	st := h.m[k]
	if st != nil && st.token != s.Token {
		return // a later hold: this release was of an older one
	}
	switch o {
	case Gone:
		delete(h.m, k)
	case Applied:
		if st != nil {
			st.believed = max(st.believed-count, 0)
			st.pending = without(st.pending, s.Drops)
			h.drop(k, st)
		}
	case Uncertain:
		now := time.Now()
		h.prune(now)
		if st == nil {
			if h.m == nil {
				h.m = map[holdKey]*holdState{}
			}
			st = &holdState{token: s.Token}
			h.m[k] = st
		}
		st.believed = max(st.believed-count, 0)
		st.pending = append(st.pending, s.Drops[0]) // its own, with the id it was sent with: the others are there
		st.ttl, st.failed = max(st.ttl, ttl), now
	}
}

// drop forgets a hold that has nothing left to settle. h.mu must be held.
func (h *Holds) drop(k holdKey, st *holdState) {
	if st.believed == 0 && len(st.pending) == 0 {
		delete(h.m, k)
	}
}

// prune forgets failed releases whose rows have expired: two TTLs after the
// failure no renewal from this client has refreshed them. h.mu must be held.
func (h *Holds) prune(now time.Time) {
	for k, st := range h.m {
		if st.believed == 0 && len(st.pending) > 0 && now.Sub(st.failed) > 2*st.ttl {
			delete(h.m, k)
		}
	}
}

// Stmt runs a release statement that applies s and reports the holds left.
type Stmt func(ctx context.Context, s Settle) (left int, o Outcome, err error)

// Settle applies, through stmt, what is owed on (name, owner) from releases
// that failed, before the owner acquires again. It returns stmt's error if
// that failed too (the acquire must not go ahead).
func (h *Holds) Settle(ctx context.Context, name, owner string, stmt Stmt) error {
	if _, ok := h.pending(name, owner); !ok {
		return nil
	}
	done, err := h.pass(ctx, holdKey{name, owner}, gateAlone)
	if err != nil {
		return err
	}
	defer done()
	s, ok := h.pending(name, owner) // again, alone: another settle may have run meanwhile
	if !ok {
		return nil
	}
	_, o, err := stmt(ctx, s)
	h.settled(name, owner, s, o)
	if o == Uncertain {
		return err
	}
	return nil
}

// Drop releases count holds of (name, owner, token), and any pending, through
// stmt, and records the outcome; ttl is the lease's.
func (h *Holds) Drop(ctx context.Context, name, owner string, token uint64, count int, ttl time.Duration, stmt Stmt) (int, Outcome, error) {
	done, err := h.pass(ctx, holdKey{name, owner}, gateAlone)
	if err != nil { // ctx ended before the statement was sent: the holds stay the store's until settled
		h.released(name, owner, count, h.release(name, owner, token, count), Uncertain, ttl)
		return 0, Uncertain, err
	}
	defer done()
	s := h.release(name, owner, token, count)
	left, o, err := stmt(ctx, s)
	h.released(name, owner, count, s, o, ttl)
	return left, o, err
}
