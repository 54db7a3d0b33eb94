package redlock

// Acquire: the token above a majority's counters, the grant on every node,
// and the undo of what an attempt without a majority in time took.

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/redisnode"
)

// kindsNote says why Redlock offers no read-write locks or semaphores (see
// the package doc).
const kindsNote = "redlock holds only mutexes: permits granted by majorities do not bound the permits " +
	"(3 nodes, 2 permits: 3 holders can each hold 2 of the 3 nodes), and Redlock has no queue across nodes " +
	"to keep a waiting writer from starving under a stream of readers"

func (d *redlockDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	start := time.Now()
	to := d.timeout(r.TTL)
	// The token: above every counter of a majority.
	counters, errs := each(ctx, d, to, func(ctx context.Context, n *redisnode.Node) (uint64, error) {
		return n.Counter(ctx, r.Name)
	})
	if err := d.refused(errs); err != nil {
		return driver.Grant{}, err
	}
	if up := countNil(errs); up < d.quorum {
		return driver.Grant{}, fmt.Errorf("redlock: acquire: only %d of %d nodes answered", up, len(d.nodes))
	}
	var token uint64
	for i, c := range counters {
		if errs[i] == nil {
			token = max(token, c)
		}
	}
	token++
	reqs := make([]string, len(d.nodes))
	for i, n := range d.nodes {
		reqs[i] = n.NewRequest()
	}
	grants, gerrs := each(ctx, d, to, func(ctx context.Context, n *redisnode.Node) (redisnode.Grant, error) {
		return n.TryAcquireReq(ctx, r.Name, r.Owner, r.Label, r.TTL, token, reqs[d.index(n)])
	})
	won, got := agreed(grants)
	var retry time.Duration
	for _, g := range grants {
		if !g.Acquired && g.TTL > 0 && (retry == 0 || g.TTL < retry) {
			retry = g.TTL
		}
	}
	if won >= d.quorum && time.Since(start) < r.TTL-drift(r.TTL) {
		d.undo(ctx, r, reqs, grants, gerrs, got.Token)
		return driver.Grant{Acquired: true, Token: got.Token, Holds: got.Holds,
			Validity: r.TTL - drift(r.TTL), Since: start}, nil
	}
	// No majority in time: undo what was granted.
	d.undo(ctx, r, reqs, grants, gerrs, 0)
	if err := d.refused(gerrs); err != nil {
		return driver.Grant{}, err
	}
	if up := countNil(gerrs); up < d.quorum && retry == 0 {
		// As when too few nodes give their counters: an error, which the
		// wait retries with backoff, and not a refusal, which would wait
		// for a release that a lock no node was seen to hold never sends.
		// A node that answered with another holder makes it a refusal.
		return driver.Grant{}, fmt.Errorf("redlock: acquire: only %d of %d nodes answered: %w", up, len(d.nodes), firstErr(gerrs))
	}
	if retry == 0 {
		// No node said another holder has it: this attempt's majority came
		// too late, and its holds are being cancelled or have expired (an
		// expiry announces nothing). Try again soon, not at the wait's
		// longest sleep.
		retry = min(to, 50*time.Millisecond)
	}
	return driver.Grant{Retry: retry}, nil
}

// firstErr is the first error of errs.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// index is n's place in d.nodes.
func (d *redlockDriver) index(n *redisnode.Node) int {
	for i, m := range d.nodes {
		if m == n {
			return i
		}
	}
	panic("redlock: not one of the driver's nodes")
}

// agreed returns the token that the most nodes granted under, how many did,
// and the grant (its hold count the greatest of theirs). The nodes of one
// acquire can grant under different tokens: a re-entry that races its
// owner's release re-enters the old hold (its token) on nodes the release
// has not reached yet and makes a new hold (the new token) on those it has.
// Only a token a quorum agrees on is a hold.
func agreed(grants []redisnode.Grant) (int, redisnode.Grant) {
	var won int
	var got redisnode.Grant
	for _, g := range grants {
		if !g.Acquired {
			continue
		}
		n, holds := 0, 0
		for _, h := range grants {
			if h.Acquired && h.Token == g.Token {
				n++
				holds = max(holds, h.Holds)
			}
		}
		if n > won {
			won, got = n, redisnode.Grant{Acquired: true, Token: g.Token, Holds: holds}
		}
	}
	return won, got
}

// undo cancels this attempt's request (reqs) on every node where it may
// have left a count that is not part of the grant: a node that granted
// under a token other than keep (under any, when keep is 0: no grant), and
// a node that did not answer, whose request may have run all the same,
// granting or re-entering under a token the driver never saw. Node.Cancel
// undoes exactly what the request did there, if anything: a new hold goes,
// a re-entry gives its count back under whatever token it re-entered, and
// a node where the request never ran is left alone. Left there, such a
// count would stay the owner's, and its next acquire would re-enter it
// under a token the others do not hold. A cancel that fails is sent again
// before the owner's next call on that node. A cancel that frees the lock
// announces it, as a release does: waiters that saw this attempt's holds
// (a split vote) and this one, whose attempt came too late, try again at
// once instead of waiting out a TTL or WakeMax for a lock nobody holds.
func (d *redlockDriver) undo(ctx context.Context, r driver.Request, reqs []string, grants []redisnode.Grant, errs []error, keep uint64) {
	stray := func(i int) bool {
		return (grants[i].Acquired && (keep == 0 || grants[i].Token != keep)) || errs[i] != nil
	}
	some := false
	for i := range grants {
		some = some || stray(i)
	}
	if !some {
		return
	}
	_, _ = each(context.WithoutCancel(ctx), d, d.timeout(r.TTL), func(ctx context.Context, n *redisnode.Node) (int, error) {
		if i := d.index(n); stray(i) {
			return 0, n.Cancel(ctx, n.Keys(r.Name), r.Owner, reqs[i], true)
		}
		return 0, nil
	})
}
