package dlock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
)

// scheduler renews every lease of a client from one timer: it keeps the holds
// in a heap ordered by when each needs attention, and at each tick sends all
// renewals that are due (or nearly due) to the driver as one batch. The timer
// is reset only when the earliest deadline moves, so taking and releasing
// leases costs no goroutine switch, and no goroutine runs between ticks. It also
// signals loss: a hold whose renewal could not be confirmed is declared lost a
// margin before it could expire in the store, never after.
type scheduler struct {
	drv driver.Driver
	// lost ends a hold as lost; renewed reports one hold's renewal result
	// (latency, error) after the store answered.
	lost    func(h *hold, err error)
	renewed func(h *hold, latency time.Duration, err error)
	mu      sync.Mutex
	h       holdHeap
	timer   *time.Timer
	at      time.Time // when the timer fires; zero when it is stopped
	stopped bool
	ticking sync.Mutex // held while a tick runs: ticks never overlap
	// renewals in flight: a tick hands each batch to a goroutine, so that no
	// store call can hold up the next tick and with it a loss at a deadline
	flights  sync.WaitGroup
	stopping context.Context // cancelled by stop: in-flight renewals give up
	halt     context.CancelFunc
	// session-loss channels from Grant.Lost, each watched by one goroutine
	watchers map[<-chan struct{}]*watcher
	pending  []lostHold // found lost during a tick, signalled after it
}

type watcher struct {
	holds map[*hold]struct{}
	stop  chan struct{}
}

func newScheduler(drv driver.Driver, lost func(*hold, error), renewed func(*hold, time.Duration, error)) *scheduler {
	s := &scheduler{drv: drv, lost: lost, renewed: renewed, watchers: map[<-chan struct{}]*watcher{}}
	s.stopping, s.halt = context.WithCancel(context.Background())
	s.timer = time.AfterFunc(time.Hour, s.fire)
	s.timer.Stop()
	return s
}

// renewEvery is the renewal interval of a lease of TTL ttl.
func renewEvery(ttl time.Duration) time.Duration { return ttl / 3 }

// margin is how long before its expiry a lease that could not be renewed is
// declared lost: room for clock drift and scheduling delay.
func margin(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// grantMargin is the least validity a grant must have left when Lock would
// return it: the loss margin, plus a tenth of the TTL (at most a second) for
// the caller to act and for the first renewal to be confirmed. A grant with
// less is released instead (see Client.grant).
func grantMargin(ttl time.Duration) time.Duration { return margin(ttl) + min(ttl/10, time.Second) }

// add schedules h, granted by a request sent at sent and valid for validity.
func (s *scheduler) add(h *hold, sent time.Time, validity time.Duration) {
	s.mu.Lock()
	s.setExpiry(h, sent, validity)
	heap.Push(&s.h, h)
	if h.lostCh != nil {
		w := s.watchers[h.lostCh]
		if w == nil {
			w = &watcher{holds: map[*hold]struct{}{}, stop: make(chan struct{})}
			s.watchers[h.lostCh] = w
			go s.watch(h.lostCh, w)
		}
		w.holds[h] = struct{}{}
	}
	s.arm()
	s.mu.Unlock()
}

// arm sets the timer for the earliest hold, if that is sooner than it is set
// for. s.mu must be held.
func (s *scheduler) arm() {
	if s.stopped || len(s.h) == 0 {
		return
	}
	next := s.h[0].next
	if s.at.IsZero() || next.Before(s.at) {
		s.at = next
		s.timer.Reset(time.Until(next))
	}
}

// setExpiry records a successful grant or renewal. s.mu must be held.
func (s *scheduler) setExpiry(h *hold, sent time.Time, validity time.Duration) {
	h.expiry = sent.Add(validity)
	h.deadline = h.expiry.Add(-margin(h.ttl))
	if h.renew {
		h.next = sent.Add(min(renewEvery(h.ttl), validity/2))
	} else {
		h.next = h.deadline
	}
}

// lowerExpiry moves h's expiry (and deadline) back to sent+v if that is
// earlier: for a store write, sent at sent, that may set the store's expiry
// to v from when it is applied. A renewing hold is then renewed as after a
// grant of v, unless a renewal is in flight. s.mu must be held; the caller
// fixes h's place in the heap.
func (s *scheduler) lowerExpiry(h *hold, sent time.Time, v time.Duration) {
	e := sent.Add(v)
	if !e.Before(h.expiry) {
		return
	}
	h.expiry = e
	h.deadline = e.Add(-margin(h.ttl))
	if h.renew && !h.renewing {
		h.next = minTime(h.next, sent.Add(min(renewEvery(h.ttl), v/2)))
	}
	h.next = minTime(h.next, h.deadline)
}

// lower is lowerExpiry for a hold that may be in the heap.
func (s *scheduler) lower(h *hold, sent time.Time, v time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.removed {
		return
	}
	s.lowerExpiry(h, sent, v)
	if h.idx >= 0 {
		heap.Fix(&s.h, h.idx)
	}
	s.arm()
}

// remove unschedules h (unlocked, lost or closed).
func (s *scheduler) remove(h *hold) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.idx >= 0 && h.idx < len(s.h) && s.h[h.idx] == h {
		heap.Remove(&s.h, h.idx)
	}
	h.idx = -1
	h.removed = true
	if w := s.watchers[h.lostCh]; w != nil {
		delete(w.holds, h)
		if len(w.holds) == 0 {
			close(w.stop)
			delete(s.watchers, h.lostCh)
		}
	}
}

// stop stops the timer, cancels the renewals in flight and waits for them
// and for a running tick to finish.
func (s *scheduler) stop() {
	s.mu.Lock()
	s.stopped = true
	s.timer.Stop()
	for ch, w := range s.watchers {
		close(w.stop)
		delete(s.watchers, ch)
	}
	s.mu.Unlock()
	s.halt()
	s.ticking.Lock()
	//lint:ignore SA2001 the empty critical section is a barrier: it waits for a running tick
	s.ticking.Unlock()
	s.flights.Wait()
}

// fire runs a tick and sets the timer for the next one. The holds the tick
// found lost are signalled after it, outside ticking, so that a Lost hook
// may close the client (whose stop waits for a running tick).
func (s *scheduler) fire() {
	s.ticking.Lock()
	s.mu.Lock()
	s.at = time.Time{}
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		s.ticking.Unlock()
		return
	}
	lost := s.tick()
	s.mu.Lock()
	s.arm()
	s.mu.Unlock()
	s.ticking.Unlock()
	for _, h := range lost {
		s.lost(h, expiredErr(h))
	}
}

// tick handles every hold that is due: those past their deadline are
// declared lost, the rest are sent for renewal in one batch. The batch runs
// in a goroutine of its own, and its holds stay in the heap, due at their
// deadline: if the renewal has not been confirmed by then, the next tick
// declares them lost while the store call is still under way. It returns
// the holds past their deadline, for the caller to signal.
func (s *scheduler) tick() (lost []*hold) {
	now := time.Now()
	var batch []*hold
	earliest := now.Add(time.Hour)
	s.mu.Lock()
	for len(s.h) > 0 {
		h := s.h[0]
		// Renewals due within a tenth of their interval join this batch.
		window := renewEvery(h.ttl) / 10
		if !h.renew || h.renewing {
			window = 0
		}
		if h.next.After(now.Add(window)) {
			break
		}
		heap.Pop(&s.h)
		if !now.Before(h.deadline) || !h.renew {
			lost = append(lost, h)
			continue
		}
		// The renewal sets the store's expiry to its TTL from when it is
		// applied, which is shorter than an expiry a longer Extend left:
		// believe no more than that from now on, answered or not.
		s.lowerExpiry(h, now, h.ttl)
		batch = append(batch, h)
		earliest = minTime(earliest, h.deadline)
	}
	for _, h := range batch { // back in the heap, due at the deadline
		h.renewing = true
		h.batchExtends = h.extends
		h.next = h.deadline
		heap.Push(&s.h, h)
	}
	if len(batch) > 0 {
		s.flights.Add(1)
	}
	s.mu.Unlock()
	if len(batch) > 0 {
		go s.renew(batch, now, earliest)
	}
	return lost
}

// renew sends one batch of renewals, started at now, and records the
// results. A renewal confirmed after its hold's deadline counts for nothing:
// the hold was declared lost at the deadline.
func (s *scheduler) renew(batch []*hold, now, earliest time.Time) {
	helds := make([]driver.Held, len(batch))
	for i, h := range batch {
		helds[i] = h.held()
	}
	ctx, cancel := context.WithDeadline(s.stopping, earliest)
	res := s.drv.Renew(ctx, helds)
	cancel()
	after := time.Now()
	for i, h := range batch {
		var err error
		if i < len(res) {
			err = res[i].Err
		}
		s.renewed(h, after.Sub(now), err)
	}
	s.mu.Lock()
	for i, h := range batch {
		h.renewing = false
		h.renewals++
		if h.removed { // unlocked, lost or closed while renewing
			continue
		}
		var r driver.RenewResult
		if i < len(res) {
			r = res[i]
		} else {
			r.Err = errors.New("driver returned too few renewal results")
		}
		switch {
		case !after.Before(h.deadline) && r.Err == nil:
			// Confirmed too late to count: the next tick declares it lost.
			continue
		case r.Err == nil:
			v := h.ttl
			if r.Validity > 0 && r.Validity < v {
				v = r.Validity
			}
			if (h.extending > 0 || h.extends != h.batchExtends) && !now.Add(v).Before(h.expiry) {
				// An Extend overlapped and may have reached the store after
				// this renewal: keep its (earlier) expiry, renew again soon.
				h.next = minTime(after.Add(max(renewEvery(h.ttl)/10, time.Millisecond)), h.deadline)
				break
			}
			s.setExpiry(h, now, v)
		case errors.Is(r.Err, ErrLeaseLost):
			s.lostLater(h, r.Err)
			continue
		case !after.Before(h.deadline):
			s.lostLater(h, fmt.Errorf("%w: renewal not confirmed before expiry: %w", ErrLeaseLost, r.Err))
			continue
		default: // uncertain: try again soon, ownership is re-checked by the renewal itself
			h.next = minTime(after.Add(max(renewEvery(h.ttl)/10, time.Millisecond)), h.deadline)
		}
		if h.idx >= 0 {
			heap.Fix(&s.h, h.idx)
		}
	}
	s.arm()
	s.mu.Unlock()
	// Done before signalling losses, so that a Lost hook may close the
	// client (whose stop waits for the renewals in flight).
	s.flights.Done()
	s.flushLost()
}

// lostLater queues h to be declared lost once s.mu is released.
func (s *scheduler) lostLater(h *hold, err error) {
	s.pending = append(s.pending, lostHold{h, err})
}

func (s *scheduler) flushLost() {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, x := range p {
		s.lost(x.h, x.err)
	}
}

type lostHold struct {
	h   *hold
	err error
}

func expiredErr(h *hold) error {
	if h.renew {
		return fmt.Errorf("%w: not renewed in time", ErrLeaseLost)
	}
	return fmt.Errorf("%w: expired (TTL %v, no renewal)", ErrLeaseLost, h.ttl)
}

// watch waits for a session-loss channel and declares its holds lost.
func (s *scheduler) watch(ch <-chan struct{}, w *watcher) {
	select {
	case <-w.stop:
		return
	case <-ch:
	}
	s.mu.Lock()
	var hs []*hold
	for h := range w.holds {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		s.lost(h, fmt.Errorf("%w: the store's session ended", ErrLeaseLost))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// holdHeap orders holds by next.
type holdHeap []*hold

func (q holdHeap) Len() int           { return len(q) }
func (q holdHeap) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q holdHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = i, j
}
func (q *holdHeap) Push(x any) {
	h := x.(*hold)
	h.idx = len(*q)
	*q = append(*q, h)
}
func (q *holdHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	h.idx = -1
	return h
}
