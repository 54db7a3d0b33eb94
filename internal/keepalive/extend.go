package keepalive

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dlock/dlock/driver"
)

// Due reports whether e is still scheduled and its deadline has passed: it
// is lost, whether or not a tick has said so yet.
func (s *Scheduler) Due(e *Entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.added && !e.removed && at(time.Now()) >= e.deadline
}

// RemovedPastDeadline reports whether e, unscheduled (an Unlock, a loss or
// a Close under way), was due to be declared lost by now had it stayed:
// a hold whose release is still waiting for the store is then no longer
// known to be held (nothing renews it, and no tick will say so).
func (s *Scheduler) RemovedPastDeadline(e *Entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.added && e.removed && at(time.Now()) >= e.deadline
}

// TimeLeft is how long e is known to be held: the time until its deadline,
// never later than its expiry in the store; 0 once it is unscheduled.
func (s *Scheduler) TimeLeft(e *Entry) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.removed || !e.added {
		return 0
	}
	return max(time.Until(e.deadline.time()), 0)
}

// Extend asks the store, through the driver's Renew, to keep e for ttl from
// now, and keeps the expiry that leaves: on success the new one; on an
// uncertain answer (an error other than ErrLeaseLost) the earlier of the old
// and the new, since the store may have applied it. Extends and renewals
// that overlap keep the earliest expiry either could have left. It returns
// the store's error (one wrapping driver.ErrLeaseLost for a success
// confirmed only at or after e's deadline, or once a tick found e lost: the
// loss is signalled, so the extension must not be reported), and whether e
// was unscheduled (unlocked, lost, closed)
// by the time the answer came; it does not end e itself.
func (s *Scheduler) Extend(ctx context.Context, e *Entry, ttl time.Duration) (removed bool, err error) {
	sent := time.Now()
	s.mu.Lock()
	busy, gen := e.renewing, e.renewals
	op := e.startExtend(at(sent.Add(ttl)))
	s.mu.Unlock()
	// The store may apply it at once and the answer never come: believe no
	// more than the new expiry from now on if it is the earlier.
	s.Lower(e, sent, ttl)
	held := s.held(e)
	held.TTL = ttl
	res := s.drv.Renew(ctx, []driver.Held{held})
	var r driver.RenewResult
	if len(res) == 1 {
		r = res[0]
	} else {
		r.Err = errors.New("driver returned no renewal result")
	}
	v := ttl
	if r.Validity > 0 && r.Validity < v {
		v = r.Validity
	}
	after := at(time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Err == nil && !e.removed && (e.idx < 0 || after >= e.deadline) {
		// A tick took e off the heap to declare it lost (its deadline
		// passed while the store call was under way), or the answer came
		// too late to count, as for a renewal: the lease is lost, and an
		// Extend reported done would have it end at the old expiry.
		r.Err = fmt.Errorf("%w: extension confirmed only after the lease's deadline", driver.ErrLeaseLost)
	}
	e.endExtend(op, r.Err == nil, at(sent.Add(v)))
	// Another Extend that overlapped this call may have reached the store
	// after it: believe no more than the expiry it could have left (bound).
	if b := time.Duration(op.bound - at(sent)); b < v {
		v = b
	}
	// A watchdog renewal that overlapped it may have too: then keep the
	// earlier expiry.
	overlapped := busy || e.renewing || e.renewals != gen
	switch {
	case e.removed || errors.Is(r.Err, driver.ErrLeaseLost):
	case r.Err != nil: // it may have been applied: the expiry was lowered when it was sent
	case !overlapped || at(sent.Add(v)) < e.expiry:
		s.keepExpiry(e, sent, v)
		if after >= e.deadline { // an overlapping Extend's expiry has passed
			r.Err = fmt.Errorf("%w: an overlapping extension may have left an expiry that has passed", driver.ErrLeaseLost)
		}
	}
	return e.removed, r.Err
}

// extendOp is an Extend in flight, for the Extends that overlap it; the
// Extends in flight on an entry are a list from Entry.inflight, so an entry
// that is never extended pays one pointer for them.
type extendOp struct {
	exp   instant   // the expiry it leaves in the store if it lands last, from its send
	bound instant   // the earliest expiry an Extend overlapping it could leave in the store
	next  *extendOp // the next Extend in flight on the entry
}

// startExtend records an Extend, sent for an expiry of exp, in flight on e:
// it and every Extend in flight may each land in the store after the
// other. s.mu must be held.
func (e *Entry) startExtend(exp instant) *extendOp {
	op := &extendOp{exp: exp, bound: instant(math.MaxInt64), next: e.inflight}
	for y := e.inflight; y != nil; y = y.next {
		op.bound = min(op.bound, y.exp)
		y.bound = min(y.bound, exp)
	}
	e.inflight = op
	return op
}

// endExtend records op's answer: on success the store's expiry, if it
// landed last, is known to be exp, which bounds the Extends still in
// flight. s.mu must be held.
func (e *Entry) endExtend(op *extendOp, ok bool, exp instant) {
	for p := &e.inflight; *p != nil; p = &(*p).next {
		if *p == op {
			*p = op.next
			break
		}
	}
	if ok {
		for y := e.inflight; y != nil; y = y.next {
			y.bound = min(y.bound, exp)
		}
	}
	e.extends++
}

// keepExpiry records an Extend's expiry. s.mu must be held.
func (s *Scheduler) keepExpiry(e *Entry, sent time.Time, v time.Duration) {
	s.setExpiry(e, sent, v)
	if e.renewing { // the renewal in flight is still due at the deadline
		e.next = e.deadline
	}
	if e.idx >= 0 {
		heap.Fix(&s.h, int(e.idx))
	}
	s.arm()
}
