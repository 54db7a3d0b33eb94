package keepalive

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock/dlock/driver"
)

// Entry is one hold as the Scheduler sees it. Its caller sets the exported
// fields before Add and does not change them after; every other field is
// the Scheduler's, read and written under its lock only.
type Entry struct {
	TTL  time.Duration
	Lost <-chan struct{} // closed when the store's session of the hold ends; may be nil
	// Ref is the caller's own value for the hold, handed back to its
	// callbacks.
	Ref any

	// guarded by the scheduler's mutex
	expiry       instant   // the store keeps the hold at least until then
	deadline     instant   // loss is signalled then, a margin before expiry
	next         instant   // when the scheduler next looks at the hold
	renewals     uint64    // renewal results recorded, for Extend
	extends      uint64    // Extend calls that may have reached the store, for renewals and Extend
	batchExtends uint64    // extends when the renewal in flight was sent
	inflight     *extendOp // Extend calls in flight (a list), for their bounds on each other

	Renew    bool  // set by the caller: renewed by the scheduler; false: a fixed lease, lost at its TTL
	added    bool  // scheduled once: expiry, deadline and next are set
	removed  bool  // unscheduled for good
	renewing bool  // a renewal of it is in flight
	idx      int32 // index in the scheduler's heap, -1 when not in it (beside the flags: 8 bytes less per hold)
}

// instant is a point in time as the monotonic nanoseconds since epoch: a
// third of a time.Time's size, for the many holds a client may keep.
type instant int64

// epoch is the origin of instants.
var epoch = time.Now()

func at(t time.Time) instant                  { return instant(t.Sub(epoch)) }
func (i instant) time() time.Time             { return epoch.Add(time.Duration(i)) }
func (i instant) add(d time.Duration) instant { return i + instant(d) }

// Scheduler renews every lease of a client from one timer: it keeps the holds
// in a heap ordered by when each needs attention, and at each tick sends all
// renewals that are due (or nearly due) to the driver as one batch. The timer
// is reset only when the earliest deadline moves, and a session's watcher
// outlives its holds (see watchers), so taking and releasing leases costs
// no goroutine switch, and no goroutine runs between ticks. It also
// signals loss: a hold whose renewal could not be confirmed is declared lost a
// margin before it could expire in the store, never after.
type Scheduler struct {
	drv  driver.Driver
	held func(*Entry) driver.Held // the hold of an entry, as the driver knows it
	// lost ends a hold as lost; renewed reports one hold's renewal result
	// (latency, error) after the store answered.
	lost    func(h *Entry, err error)
	renewed func(h *Entry, latency time.Duration, err error)
	mu      sync.Mutex
	h       entryHeap
	timer   *time.Timer
	at      time.Time // when the timer fires; zero when it is stopped
	stopped bool
	ticking sync.Mutex // held while a tick runs: ticks never overlap
	// renewals in flight: a tick hands each batch to a goroutine, so that no
	// store call can hold up the next tick and with it a loss at a deadline
	flights  sync.WaitGroup
	stopping context.Context // cancelled by stop: in-flight renewals give up
	halt     context.CancelFunc
	// session-loss channels from Grant.Lost, each watched by one goroutine.
	// A watcher whose last hold went stays, idle, so that the next hold of
	// the same session (an uncontended Lock after an Unlock) starts no
	// goroutine; the longest idle beyond maxIdleWatchers are stopped.
	watchers map[<-chan struct{}]*watcher
	idle     int        // watchers without holds
	idleSeq  uint64     // orders idle watchers by when they went idle
	pending  []lostHold // found lost during a tick, signalled after it
}

// maxIdleWatchers is how many watchers without holds a Scheduler keeps: a
// client uses one store session per TTL (etcd) or per connection
// (ZooKeeper), so a few cover them all.
const maxIdleWatchers = 4

type watcher struct {
	holds  map[*Entry]struct{}
	stop   chan struct{}
	idleAt uint64 // when it went idle (idleSeq); 0 while it has holds
}

// NewScheduler returns a Scheduler renewing holds through drv, which it
// names by held(e). It calls
// lost to end an entry as lost (from a tick, a renewal's answer or the end
// of the entry's store session), and renewed with each entry's renewal
// result after the store answered; neither is called with the Scheduler's
// lock held.
func NewScheduler(drv driver.Driver, held func(e *Entry) driver.Held, lost func(e *Entry, err error), renewed func(e *Entry, latency time.Duration, err error)) *Scheduler {
	s := &Scheduler{drv: drv, held: held, lost: lost, renewed: renewed, watchers: map[<-chan struct{}]*watcher{}}
	s.stopping, s.halt = context.WithCancel(context.Background())
	s.timer = time.AfterFunc(time.Hour, s.fire)
	s.timer.Stop()
	return s
}

// Add schedules h, granted by a request sent at sent and valid for validity.
func (s *Scheduler) Add(h *Entry, sent time.Time, validity time.Duration) {
	s.mu.Lock()
	s.setExpiry(h, sent, validity)
	heap.Push(&s.h, h)
	if h.Lost != nil && !s.stopped { // after Stop, nothing would stop its watcher
		w := s.watchers[h.Lost]
		if w == nil {
			w = &watcher{holds: map[*Entry]struct{}{}, stop: make(chan struct{})}
			s.watchers[h.Lost] = w
			go s.watch(h.Lost, w)
		}
		if w.idleAt != 0 {
			w.idleAt = 0
			s.idle--
		}
		w.holds[h] = struct{}{}
	}
	s.arm()
	s.mu.Unlock()
}

// arm sets the timer for the earliest hold, if that is sooner than it is set
// for. s.mu must be held.
func (s *Scheduler) arm() {
	if s.stopped || len(s.h) == 0 {
		return
	}
	next := s.h[0].next.time()
	if s.at.IsZero() || next.Before(s.at) {
		s.at = next
		s.timer.Reset(time.Until(next))
	}
}

// setExpiry records a successful grant or renewal. s.mu must be held.
func (s *Scheduler) setExpiry(h *Entry, sent time.Time, validity time.Duration) {
	h.added = true
	h.expiry = at(sent.Add(validity))
	h.deadline = h.expiry.add(-LossMargin(h.TTL))
	if h.Renew {
		h.next = at(sent.Add(min(RenewInterval(h.TTL), validity/2)))
	} else {
		h.next = h.deadline
	}
}

// lowerExpiry moves h's expiry (and deadline) back to sent+v if that is
// earlier: for a store write, sent at sent, that may set the store's expiry
// to v from when it is applied. A renewing hold is then renewed as after a
// grant of v, unless a renewal is in flight. s.mu must be held; the caller
// fixes h's place in the heap.
func (s *Scheduler) lowerExpiry(h *Entry, sent time.Time, v time.Duration) {
	e := at(sent.Add(v))
	if e >= h.expiry {
		return
	}
	h.expiry = e
	h.deadline = e.add(-LossMargin(h.TTL))
	if h.Renew && !h.renewing {
		h.next = min(h.next, at(sent.Add(min(RenewInterval(h.TTL), v/2))))
	}
	h.next = min(h.next, h.deadline)
}

// Lower is lowerExpiry for a hold that may be in the heap: for a store
// write, sent at sent, that may set the hold's expiry to v from when it is
// applied (a re-entry counted in the store).
func (s *Scheduler) Lower(h *Entry, sent time.Time, v time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.removed {
		return
	}
	s.lowerExpiry(h, sent, v)
	if h.idx >= 0 {
		heap.Fix(&s.h, int(h.idx))
	}
	s.arm()
}

// Remove unschedules h (unlocked, lost or closed).
func (s *Scheduler) Remove(h *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.idx >= 0 && int(h.idx) < len(s.h) && s.h[h.idx] == h {
		heap.Remove(&s.h, int(h.idx))
	}
	h.idx = -1
	h.removed = true
	if w := s.watchers[h.Lost]; w != nil {
		delete(w.holds, h)
		if len(w.holds) == 0 && w.idleAt == 0 {
			s.idleSeq++
			w.idleAt = s.idleSeq
			s.idle++
			if s.idle > maxIdleWatchers {
				s.stopLongestIdle()
			}
		}
	}
}

// stopLongestIdle stops the watcher that has been idle longest. s.mu must
// be held.
func (s *Scheduler) stopLongestIdle() {
	var oldest <-chan struct{}
	var ow *watcher
	for ch, w := range s.watchers {
		if w.idleAt != 0 && (ow == nil || w.idleAt < ow.idleAt) {
			oldest, ow = ch, w
		}
	}
	if ow != nil {
		close(ow.stop)
		delete(s.watchers, oldest)
		s.idle--
	}
}

// Stop stops the timer, cancels the renewals in flight and waits for them
// and for a running tick to finish.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.timer.Stop()
	for ch, w := range s.watchers {
		close(w.stop)
		delete(s.watchers, ch)
	}
	s.idle = 0
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
func (s *Scheduler) fire() {
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
		s.lost(h, s.ExpiredErr(h))
	}
}

// tick handles every hold that is due: those past their deadline are
// declared lost, the rest are sent for renewal in one batch. The batch runs
// in a goroutine of its own, and its holds stay in the heap, due at their
// deadline: if the renewal has not been confirmed by then, the next tick
// declares them lost while the store call is still under way. It returns
// the holds past their deadline, for the caller to signal.
func (s *Scheduler) tick() (lost []*Entry) {
	now := time.Now()
	nowAt := at(now)
	var batch []*Entry
	earliest := now.Add(time.Hour)
	s.mu.Lock()
	for len(s.h) > 0 {
		h := s.h[0]
		// Renewals due within a tenth of their interval join this batch.
		window := RenewInterval(h.TTL) / 10
		if !h.Renew || h.renewing {
			window = 0
		}
		if h.next > nowAt.add(window) {
			break
		}
		heap.Pop(&s.h)
		if nowAt >= h.deadline || !h.Renew {
			lost = append(lost, h)
			continue
		}
		// The renewal sets the store's expiry to its TTL from when it is
		// applied, which is shorter than an expiry a longer Extend left:
		// believe no more than that from now on, answered or not.
		s.lowerExpiry(h, now, h.TTL)
		batch = append(batch, h)
		earliest = minTime(earliest, h.deadline.time())
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
func (s *Scheduler) renew(batch []*Entry, now, earliest time.Time) {
	helds := make([]driver.Held, len(batch))
	for i, h := range batch {
		helds[i] = s.held(h)
	}
	ctx, cancel := context.WithDeadline(s.stopping, earliest)
	res := s.drv.Renew(ctx, helds)
	cancel()
	after := time.Now()
	afterAt := at(after)
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
		case afterAt >= h.deadline && r.Err == nil:
			// Confirmed too late to count: the next tick declares it lost.
			continue
		case r.Err == nil:
			v := h.TTL
			if r.Validity > 0 && r.Validity < v {
				v = r.Validity
			}
			if (h.inflight != nil || h.extends != h.batchExtends) && at(now.Add(v)) >= h.expiry {
				// An Extend overlapped and may have reached the store after
				// this renewal: keep its (earlier) expiry, renew again soon.
				h.next = min(at(after.Add(max(RenewInterval(h.TTL)/10, time.Millisecond))), h.deadline)
				break
			}
			s.setExpiry(h, now, v)
		case errors.Is(r.Err, driver.ErrLeaseLost):
			s.lostLater(h, r.Err)
			continue
		case afterAt >= h.deadline:
			s.lostLater(h, fmt.Errorf("%w: renewal not confirmed before expiry: %w", driver.ErrLeaseLost, r.Err))
			continue
		default: // uncertain: try again soon, ownership is re-checked by the renewal itself
			h.next = min(at(after.Add(max(RenewInterval(h.TTL)/10, time.Millisecond))), h.deadline)
		}
		if h.idx >= 0 {
			heap.Fix(&s.h, int(h.idx))
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
func (s *Scheduler) lostLater(h *Entry, err error) {
	s.pending = append(s.pending, lostHold{h, err})
}

func (s *Scheduler) flushLost() {
	s.mu.Lock()
	p := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, x := range p {
		s.lost(x.h, x.err)
	}
}

type lostHold struct {
	h   *Entry
	err error
}

// ExpiredErr is the loss error of an entry whose deadline passed. A fixed
// lease's names its TTL, and says if an Extend may have set another (the
// message named only the grant's TTL, shorter or longer than the one that
// ended).
func (s *Scheduler) ExpiredErr(h *Entry) error {
	if h.Renew {
		return fmt.Errorf("%w: not renewed in time", driver.ErrLeaseLost)
	}
	s.mu.Lock()
	extended := h.extends > 0
	s.mu.Unlock()
	if extended {
		return fmt.Errorf("%w: expired (TTL %v, then extended; no renewal)", driver.ErrLeaseLost, h.TTL)
	}
	return fmt.Errorf("%w: expired (TTL %v, no renewal)", driver.ErrLeaseLost, h.TTL)
}

// watch waits for a session-loss channel and declares its holds lost.
func (s *Scheduler) watch(ch <-chan struct{}, w *watcher) {
	select {
	case <-w.stop:
		return
	case <-ch:
	}
	s.mu.Lock()
	if s.watchers[ch] == w { // a hold added from now on starts a watcher that finds ch closed
		delete(s.watchers, ch)
		if w.idleAt != 0 {
			s.idle--
		}
	}
	var hs []*Entry
	for h := range w.holds {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	for _, h := range hs {
		s.lost(h, fmt.Errorf("%w: the store's session ended", driver.ErrLeaseLost))
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// entryHeap orders holds by next.
type entryHeap []*Entry

func (q entryHeap) Len() int           { return len(q) }
func (q entryHeap) Less(i, j int) bool { return q[i].next < q[j].next }
func (q entryHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx, q[j].idx = int32(i), int32(j)
}
func (q *entryHeap) Push(x any) {
	h := x.(*Entry)
	h.idx = int32(len(*q))
	*q = append(*q, h)
}
func (q *entryHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	h.idx = -1
	return h
}
