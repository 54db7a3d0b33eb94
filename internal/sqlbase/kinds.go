package sqlbase

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlock/dlock/driver"
)

// Read-write locks and semaphores in the SQL table modes. A lock of a kind
// family is a state row (token counter, arrival counter, permit count) that
// every acquire locks FOR UPDATE, so the decision below is taken on the
// rows as they are; its live holds; and, for a read-write lock, the records
// of refused readers and writers waiting in arrival order.
//
// A waiting record lives for WaitRecord (or the TTL if shorter) unless the
// waiter's next attempt renews it; the waiter is told to come back within
// half that time. A waiter that gives up drops its record (dlock releases
// the owner with token 0); one that dies holds the ones behind it back for
// at most that long; a refused try (driver.Request.Try) leaves no record.

// WaitRecord is the longest life of a waiting record.
const WaitRecord = 2 * time.Second

// KindHold is a live hold row, or, with Owners above 1, a summary of as
// many holds of Kind (of owners other than the requester's), of which the
// first ends in TTLLeft.
type KindHold struct {
	Owner   string
	Label   string
	Kind    driver.Kind
	Holds   int
	Token   uint64
	TTLLeft time.Duration
	Owners  int // the holds this one stands for (0: one)
}

// count is how many holds holds are or sum up.
func count(holds []KindHold) int {
	n := 0
	for _, h := range holds {
		n += max(h.Owners, 1)
	}
	return n
}

// KindWait is a live waiting record, or, with Owner "", the first in line
// of the others' records of Kind (all the verdict asks of them).
type KindWait struct {
	Owner string
	Kind  driver.Kind
	Seq   uint64
}

// Verdict is what an acquire gets.
type Verdict int

// The verdicts.
const (
	Refuse   Verdict = iota // wait (a read-write request keeps its place: upsert its record)
	Grant                   // a new hold with a new token
	Reenter                 // one more hold of the owner's live hold of the kind
	Mismatch                // the semaphore's live holds use another permit count
	KindHeld                // the owner holds the other kind (dlock never asks this)
)

// Decide says what req gets given the lock's live holds and waiting records
// and the stored permit count: a read needs no write hold and no writer
// waiting ahead of it; a write needs no hold and nobody waiting ahead of
// it; a permit needs fewer live holds than the limit, which must match the
// stored one while there are holds. seq is req's place in line: its
// record's, or 0 when it has none (it is then behind everybody).
func Decide(req driver.Request, holds []KindHold, waits []KindWait, limit int) Verdict {
	for _, h := range holds {
		if h.Owner == req.Owner {
			switch {
			case h.Kind != req.Kind:
				return KindHeld
			case req.Kind == driver.Permit && req.Limit != limit:
				return Mismatch
			}
			return Reenter
		}
	}
	switch req.Kind {
	case driver.Permit:
		if len(holds) > 0 && req.Limit != limit {
			return Mismatch
		}
		if count(holds) < req.Limit {
			return Grant
		}
		return Refuse
	case driver.Shared, driver.Write:
	default:
		return Refuse
	}
	var seq uint64 // 0: no record, behind everybody
	for _, w := range waits {
		if w.Owner == req.Owner {
			seq = w.Seq
		}
	}
	for _, h := range holds {
		if req.Kind == driver.Write || h.Kind == driver.Write {
			return Refuse
		}
	}
	for _, w := range waits {
		ahead := w.Owner != req.Owner && (seq == 0 || w.Seq < seq)
		if ahead && (req.Kind == driver.Write || w.Kind == driver.Write) {
			return Refuse
		}
	}
	return Grant
}

// Retry is how soon a refused request should try again: when the first of
// the holds ends, and for a read-write request no later than half its
// waiting record's life.
func Retry(req driver.Request, holds []KindHold) time.Duration {
	var d time.Duration
	for _, h := range holds {
		if d == 0 || h.TTLLeft < d {
			d = h.TTLLeft
		}
	}
	if req.Kind != driver.Permit {
		if half := WaitLife(req.TTL) / 2; d <= 0 || half < d {
			d = half
		}
	}
	return max(d, time.Millisecond)
}

// WaitLife is how long a waiting record of a request with ttl lives.
func WaitLife(ttl time.Duration) time.Duration { return min(ttl, WaitRecord) }

// Top is the hold Info describes in its single-holder fields: the write
// hold if there is one, else the one with the greatest token.
func Top(holds []KindHold) (KindHold, bool) {
	var top KindHold
	for _, h := range holds {
		if h.Token > top.Token {
			top = h
		}
	}
	return top, len(holds) > 0
}

// Info describes a read-write lock or semaphore from its rows.
func Info(name string, kind driver.Kind, holds []KindHold, waiters, limit int) driver.Info {
	info := driver.Info{Name: name, Kind: kind, Waiters: waiters}
	if kind == driver.Permit {
		info.Limit = limit
	}
	for _, h := range holds {
		info.Holders = append(info.Holders, driver.Holder{Owner: h.Owner, Label: h.Label, Kind: h.Kind, Token: h.Token,
			Holds: h.Holds, TTL: h.TTLLeft})
	}
	slices.SortFunc(info.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Token, b.Token) })
	if top, ok := Top(holds); ok {
		info.Held, info.Kind = true, top.Kind
		info.Owner, info.Label, info.Holds, info.Token, info.TTL = top.Owner, top.Label, top.Holds, top.Token, top.TTLLeft
	}
	return info
}

// ErrHoldGone is what an acquire transaction returns (rolling back) when it
// decided Reenter on the owner's hold row, but the row was gone when it
// came to count the re-entry: a release of the owner's last hold, which
// does not lock the state row, deleted it after the decision read it.
// AcquireKind then runs the transaction again, which decides on the rows
// without it.
var ErrHoldGone = errors.New("the owner's hold was released while re-entering it")

// AcquireKind is the table modes' acquire of a read, write or permit
// request r, as both SQL backends do it: try runs one acquire transaction
// (its grant, verdict and the stored permit count), again up to three times
// while it fails with a deadlock (deadlock says which errors are one: a
// renewal batch locks hold rows of several locks), and again whenever it
// fails with ErrHoldGone (each time follows a release's commit); then a
// failure is wrapped by wrap, and a Mismatch or KindHeld verdict refused
// with the error dlock matches. pkg prefixes the errors.
func AcquireKind(ctx context.Context, pkg string, r driver.Request, try func() (driver.Grant, Verdict, int, error),
	deadlock func(error) bool, wrap func(op string, err error) error) (driver.Grant, error) {
	var (
		g       driver.Grant
		verdict Verdict
		limit   int
		err     error
	)
	for n := 0; ; {
		g, verdict, limit, err = try()
		if err == nil || ctx.Err() != nil {
			break
		}
		if errors.Is(err, ErrHoldGone) {
			continue
		}
		if n == 3 || !deadlock(err) {
			break
		}
		n++
	}
	if err != nil {
		return driver.Grant{}, wrap("acquire", err)
	}
	switch verdict {
	case Mismatch:
		return driver.Grant{}, fmt.Errorf("%s: %w: %q is held with %d permits, asked with %d", pkg, driver.ErrLimitMismatch, r.Name, limit, r.Limit)
	case KindHeld:
		return driver.Grant{}, fmt.Errorf("%s: %w: %q is held by this owner as another kind", pkg, driver.ErrUnsupported, r.Name)
	}
	return g, nil
}
