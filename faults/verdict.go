package faults

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dlock/dlock/internal/keepalive"
)

// Result is one backend × fault: the promise, what was observed, and the
// verdicts that failed.
type Result struct {
	Backend, Fault string
	Promise        Promise
	// Lock and Permits are the kind of lock contended for (Backend.Lock).
	Lock    string
	Permits int

	Injections int // faults injected
	Holds      int // grants observed
	Errors     int // Lock calls that failed
	Overlaps   int // conflicting belief intervals not excused by the fault (a semaphore: grants past its permits)
	Excused    int // overlaps excused by the fault (a holder paused past its TTL, a killed connection) or by a stall
	Stalled    int // holds told of their loss late because their process was not running (see excuseStalls)
	// Stalls counts the workers' stalls (their process not running for
	// over 3 ms), and StallMs adds up their length: how loaded the
	// machine was.
	Stalls   int
	StallMs  float64
	Unfenced int // excused overlaps whose holder not excused (the newer) had no higher token
	Stale    int // writes the fenced view rejected
	// MinMarginMs is the smallest loss-signal margin: a holder's Done
	// before the next holder's grant, in ms (NaN: no loss observed).
	MinMarginMs float64
	Losses      int     // holds that ended by loss
	LateLosses  int     // of which the next holder was granted first
	RecoveryMs  float64 // the longest time from a holder's kill or cut, or a leader's kill, to the next grant (NaN: none), less StoreRecoveryMs
	ProgressMs  float64 // the longest time from a fault's end to the next grant, less StoreProgressMs
	Regressions int     // grants whose token was not above every earlier grant's
	DeadGrants  int     // leases lost within 20 ms of Lock returning, with no fault to explain it

	// StoreRecoveryMs and StoreProgressMs are the store's stalls (it
	// answered the controller's probe late, see probeStore) inside the
	// waits that RecoveryMs and ProgressMs measure: time in which no lock
	// could be granted, which the bounds do not count. StoreStalls and
	// StoreStallMs count and add up all of them. Probed says the store was
	// probed (one server, a fault that leaves it alone), and Probes how
	// many probes it answered.
	StoreRecoveryMs, StoreProgressMs float64
	StoreStalls                      int
	StoreStallMs                     float64
	Probed                           bool
	Probes                           int
	// StoreExcused says which bounds were met only with the store's
	// stalls left out: a pass a reader should know was excused.
	StoreExcused []string

	Fails  []string // failed verdicts; empty means pass
	Error  string   // the scenario could not run
	Output string   // workers' output, when something failed

	History []Event // every event, in arrival order
}

// OK says the scenario ran and every verdict passed.
func (r *Result) OK() bool { return r.Error == "" && len(r.Fails) == 0 }

type holdRec struct {
	id         holdID
	mode       string // Event.Mode
	asked      int64  // when its Lock call began (the worker's last wait)
	token      uint64
	start, end int64
	loss       int64
	excused    bool
	pausedIn   bool // its belief began inside a long pause of its worker
	stalled    bool // told of its loss late while its process stalled: its overlaps with later grants are excused
	ranOut     bool // Event.RanOut: its lease had run out when its belief was stamped
}

type window struct {
	worker   int
	from, to int64
}

// judge computes the figures from the history and the verdicts against the
// promise, in five passes: replay the events into holds and fault windows,
// end and excuse each belief, count conflicts, measure token order, loss
// margins and recovery, and hold the figures to the promise.
// connDeath: a holder whose connection dies (killed, or the server killed)
// is excused, as SQL row/session modes' docs say fencing covers that window.
func (r *Result) judge(evs []Event, ttl time.Duration, connDeath bool) {
	tl := r.replay(evs)
	hs := tl.beliefs(ttl, connDeath)
	r.Holds = len(hs)
	r.excuseStalls(hs, tl.stalls, ttl)
	r.countOverlaps(hs)
	r.countRegressions(hs)
	r.measureLosses(hs, tl.srvEvents)
	r.measureRecovery(hs, tl.deaths, tl.faultEnds, tl.storeStalls, ttl)
	r.verdicts()
}

// timeline is a history replayed: the holds granted and the faults' windows
// and instants, in the workers' clock (ns).
type timeline struct {
	last   int64 // the latest instant seen
	holds  map[holdID]*holdRec
	pauses []window // a worker stopped (SIGSTOP to SIGCONT)
	stalls []window // a worker's process not running its goroutines (kindStall)
	// storeStalls: the store answering late (kindStoreStall)
	storeStalls []window
	targets     []window // a connection or server killed (worker -1: every worker)
	faultEnds   []int64
	deaths      []int64 // a holder killed or cut off, or the leader killed
	srvEvents   []int64 // the store's side of a fault: a connection or server killed, a cut
}

// replay reads the events in arrival order into a timeline, and counts the
// figures that need no more than one event (stale writes, errors,
// injections).
func (r *Result) replay(evs []Event) *timeline {
	tl := &timeline{holds: map[holdID]*holdRec{}}
	open := map[int]*holdRec{} // by worker
	pausedAt := map[int]int64{}
	asked := map[int]int64{} // by worker: its last wait
	for _, e := range evs {
		tl.last = max(tl.last, e.T, e.Recv)
		switch e.Kind {
		case kindGrant:
			h := &holdRec{id: e.id(), mode: e.Mode, asked: asked[e.Worker], token: e.Token, start: e.T, ranOut: e.RanOut}
			tl.holds[h.id], open[e.Worker] = h, h
		case kindEnd:
			if h := tl.holds[e.id()]; h != nil {
				h.end, h.loss = e.T, e.LossAt
				delete(open, e.Worker)
			}
		case kindWait:
			asked[e.Worker] = e.T
		case kindWrite:
			if !e.Accepted {
				r.Stale++
			}
		case kindError:
			r.Errors++
		case kindKill:
			if h := open[e.Worker]; h != nil {
				h.end = e.T
				delete(open, e.Worker)
			}
			tl.deaths = append(tl.deaths, e.T)
		case kindPause:
			pausedAt[e.Worker] = e.T
		case kindStall:
			tl.stalls = append(tl.stalls, window{e.Worker, e.T, e.Until})
			r.Stalls++
			r.StallMs += float64(e.Until-e.T) / 1e6
		case kindStoreStall:
			tl.storeStalls = append(tl.storeStalls, window{e.Worker, e.T, e.Until})
			r.StoreStalls++
			r.StoreStallMs += float64(e.Until-e.T) / 1e6
		case kindResume:
			tl.pauses = append(tl.pauses, window{e.Worker, pausedAt[e.Worker], e.T})
		case kindConnKill, kindCut:
			tl.srvEvents = append(tl.srvEvents, e.T)
			if e.Kind == kindConnKill {
				tl.targets = append(tl.targets, window{e.Worker, e.T, e.T})
			} else {
				tl.deaths = append(tl.deaths, e.T) // to the store, a cut-off holder is dead
			}
		case kindSrvKill:
			tl.srvEvents = append(tl.srvEvents, e.T)
			tl.targets = append(tl.targets, window{-1, e.T, e.T})
			if r.Fault == KillLeader.Name {
				tl.deaths = append(tl.deaths, e.T)
			}
		case kindFaultEnd:
			tl.faultEnds = append(tl.faultEnds, e.T)
		case kindInject:
			r.Injections++
		}
	}
	return tl
}

// beliefs ends every hold still believed at the end of the history, excuses
// those a fault explains (a pause past the TTL; with connDeath, a killed
// connection or server), and returns them in grant order.
func (tl *timeline) beliefs(ttl time.Duration, connDeath bool) []*holdRec {
	var hs []*holdRec
	for _, h := range tl.holds {
		if h.end == 0 {
			h.end = tl.last // believed until the end
		}
		for _, w := range tl.pauses {
			if w.worker == h.id.worker && w.to-w.from > int64(ttl) && w.from < h.end && w.to > h.start {
				h.excused = true
				// Paused between its grant and the stamp of its belief
				// (a pause is recorded before SIGSTOP and after SIGCONT):
				// its belief begins later than its grant did.
				h.pausedIn = h.pausedIn || w.from <= h.start
			}
			// Paused after Lock had the grant but before it stamped it
			// (after the pause was recorded as over): the lease says it ran
			// out before the stamp, and the pause came during the Lock
			// call. The grant is the pause's, older than its stamp.
			if w.worker == h.id.worker && w.to-w.from > int64(ttl) && h.ranOut && w.from >= h.asked && w.to <= h.start {
				h.excused, h.pausedIn = true, true
			}
		}
		if connDeath {
			for _, w := range tl.targets {
				if (w.worker == h.id.worker || w.worker == -1) && w.from >= h.start && w.from <= h.end {
					h.excused = true
				}
			}
		}
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *holdRec) int { return cmpInt(a.start, b.start) })
	return hs
}

// excuseStalls excuses a holder told of its loss after the next conflicting
// grant when its own process was shown not running for at least as long as
// it was late: on a loaded machine the scheduler can hold a process's
// goroutines back, which is a pause as far as the lock can tell (the timer
// that signals the loss fires, and the holder's code runs, only when the
// process runs again). The lease was declared lost a margin before the
// store's expiry, at or before next.start − LossMargin, so only stalls from
// there to the moment the holder saw its loss count. Like a pause's, such
// an overlap is excused only if fenced: the next holder's token must be
// higher.
func (r *Result) excuseStalls(hs []*holdRec, stalls []window, ttl time.Duration) {
	margin := int64(keepalive.LossMargin(ttl))
	for i, h := range hs {
		if h.loss == 0 || h.excused {
			continue
		}
		next := r.nextConflict(hs, i)
		if next == nil || next.start >= h.loss {
			continue // told in time
		}
		from := next.start - margin
		var stalled int64
		for _, w := range stalls {
			if w.worker == h.id.worker {
				stalled += max(0, min(w.to, h.loss)-max(w.from, from))
			}
		}
		if stalled >= h.loss-next.start {
			h.stalled = true // excuses its overlaps with later grants only
			r.Stalled++
		}
	}
}

// countOverlaps counts conflicting beliefs: excused ones (and of those, the
// ones whose fresh holder had no higher token) and the rest.
func (r *Result) countOverlaps(hs []*holdRec) {
	for i, b := range hs {
		var live []*holdRec // holds believed when b was granted
		for _, a := range hs[:i] {
			if a.end > b.start {
				live = append(live, a)
			}
		}
		if r.Lock == "semaphore" {
			if len(live)+1 > r.Permits {
				if b.excused || slices.ContainsFunc(live, func(a *holdRec) bool { return a.excused || a.stalled }) {
					r.Excused++ // permits carry no fencing: tokens are not judged
				} else {
					r.Overlaps++
				}
			}
			continue
		}
		for _, a := range live {
			if !conflict(a, b) {
				continue
			}
			if a.excused || a.stalled || b.excused {
				r.Excused++
				// The stale holder is the excused one: the other, granted
				// after its lease ran out, must have the higher token. It
				// is b when its worker was paused before it could stamp
				// its belief's start.
				stale, fresh := a, b
				if b.excused && !a.excused && !a.stalled {
					stale, fresh = b, a
				}
				if fresh.token <= stale.token {
					r.Unfenced++
				}
			} else {
				r.Overlaps++
			}
		}
	}
}

// countRegressions counts token regressions, in grant order: a mutex's
// grants all increase. The other kinds' concurrent grants may be reported
// out of order (a grant made first in the store can return later), so a
// grant must be above every grant returned before its Lock call began: the
// store made those first.
func (r *Result) countRegressions(hs []*holdRec) {
	var maxTok uint64
	for i, h := range hs {
		if r.Lock == "" {
			if i > 0 && h.token <= maxTok && !h.pausedIn { // a paused-in grant is older than its stamp: fencing judges it
				r.Regressions++
			}
			maxTok = max(maxTok, h.token)
			continue
		}
		if slices.ContainsFunc(hs[:i], func(a *holdRec) bool { return h.token <= a.token && a.start < h.asked }) {
			r.Regressions++
		}
	}
}

// measureLosses measures the loss signals: how long before the next
// conflicting grant each holder's Done came, and the leases lost right after
// their grant with no fault on the store's side to explain it.
func (r *Result) measureLosses(hs []*holdRec, srvEvents []int64) {
	r.MinMarginMs = math.NaN()
	for i, h := range hs {
		if h.loss == 0 || h.excused || h.stalled {
			continue
		}
		r.Losses++
		if h.loss-h.start < int64(20*time.Millisecond) && !near(srvEvents, h.start-int64(100*time.Millisecond), h.loss) {
			r.DeadGrants++
		}
		if next := r.nextConflict(hs, i); next != nil {
			m := float64(next.start-h.loss) / 1e6
			if math.IsNaN(r.MinMarginMs) || m < r.MinMarginMs {
				r.MinMarginMs = m
			}
			if m <= 0 {
				r.LateLosses++
			}
		}
	}
}

// measureRecovery measures the longest wait for a grant after a holder's
// (or leader's) death, and after a fault's end, each less the store's
// stalls inside it: after a death, only those after its TTL, since the
// holder's lease runs out by the store's clock whether the store runs or
// not.
func (r *Result) measureRecovery(hs []*holdRec, deaths, faultEnds []int64, storeStalls []window, ttl time.Duration) {
	r.RecoveryMs = math.NaN()
	if len(deaths) > 0 {
		r.RecoveryMs = 0
		for _, t := range deaths {
			if wait, stalled := waitFor(hs, t, t+int64(ttl), storeStalls, r.Promise.Recovery/2); wait > r.RecoveryMs {
				r.RecoveryMs, r.StoreRecoveryMs = wait, stalled
			}
		}
	}
	for _, t := range faultEnds {
		if wait, stalled := waitFor(hs, t, t, storeStalls, r.Promise.Progress/2); wait > r.ProgressMs {
			r.ProgressMs, r.StoreProgressMs = wait, stalled
		}
	}
}

// waitFor is the time in ms from t to the next grant (+Inf: none), less the
// store's stalls in it from from on, and that time of stalls (ms). At most
// most is left out: a stall need not be what held the grant up (a waiter
// asleep on a timer of its own, late by a bug, is no faster for a store
// that answers), so it excuses no more than half a bound.
func waitFor(hs []*holdRec, t, from int64, storeStalls []window, most time.Duration) (wait, stalled float64) {
	wait = nextGrant(hs, t)
	if math.IsInf(wait, 1) {
		return wait, 0
	}
	end := t + int64(wait*1e6)
	var ns int64
	for _, w := range storeStalls {
		ns += max(0, min(w.to, end)-max(w.from, from))
	}
	stalled = min(float64(ns), float64(most)) / 1e6
	return wait - stalled, stalled
}

// verdicts holds the figures to the promise and records each one that fails.
func (r *Result) verdicts() {
	p := r.Promise
	fail := func(format string, args ...any) { r.Fails = append(r.Fails, fmt.Sprintf(format, args...)) }
	if p.Exclusive && r.Overlaps > 0 {
		fail("%d overlapping holds", r.Overlaps)
	}
	if p.Fenced && r.Unfenced > 0 {
		fail("%d excused overlaps not ordered by token", r.Unfenced)
	}
	if p.LossFirst && r.LateLosses > 0 {
		fail("%d holders told after the next grant (min margin %.0f ms)", r.LateLosses, r.MinMarginMs)
	}
	if p.Tokens && r.Regressions > 0 {
		fail("%d token regressions", r.Regressions)
	}
	excused := func(what string, wait, stalled float64, bound time.Duration) {
		if wait <= ms(bound) && wait+stalled > ms(bound) {
			r.StoreExcused = append(r.StoreExcused, fmt.Sprintf("%s %.0f ms, bound %v, met leaving out %.0f ms of store stalls", what, wait+stalled, bound, stalled))
		}
	}
	if p.Recovery > 0 {
		excused("recovery", r.RecoveryMs, r.StoreRecoveryMs, p.Recovery)
	}
	excused("progress", r.ProgressMs, r.StoreProgressMs, p.Progress)
	if p.Recovery > 0 && !(r.RecoveryMs <= ms(p.Recovery)) {
		fail("next grant %.0f ms after the holder's or leader's death%s, bound %v", r.RecoveryMs, storeNote(r.StoreRecoveryMs), p.Recovery)
	}
	if !(r.ProgressMs <= ms(p.Progress)) {
		fail("next grant %.0f ms after the fault ended%s, bound %v", r.ProgressMs, storeNote(r.StoreProgressMs), p.Progress)
	}
	if r.DeadGrants > 0 {
		fail("%d leases lost within 20 ms of their grant", r.DeadGrants)
	}
	if r.Injections == 0 {
		fail("no fault injected")
	}
}

// storeNote says how much of a wait the store stalled, if it did.
func storeNote(stalled float64) string {
	if stalled == 0 {
		return ""
	}
	return fmt.Sprintf(" not counting %.0f ms in which the store answered late", stalled)
}

// conflict reports whether holds a and b may not be believed at once: any
// two of a mutex, or of a read-write lock unless both are reads.
func conflict(a, b *holdRec) bool {
	return a.mode == "" || a.mode == "w" || b.mode == "w"
}

// nextConflict is the first grant after hs[i] that could not be granted
// while hs[i] was still held (nil: none): for a semaphore, the first that
// would exceed its permits counting hs[i] as held.
func (r *Result) nextConflict(hs []*holdRec, i int) *holdRec {
	h := hs[i]
	for j := i + 1; j < len(hs); j++ {
		b := hs[j]
		if r.Lock != "semaphore" {
			if conflict(h, b) {
				return b
			}
			continue
		}
		n := 1 // h
		for k, a := range hs[:j] {
			if k != i && a.end > b.start {
				n++
			}
		}
		if n+1 > r.Permits {
			return b
		}
	}
	return nil
}

// nextGrant is the time in ms from t to the first grant after it (to the end
// +Inf when there was none).
func nextGrant(hs []*holdRec, t int64) float64 {
	for _, h := range hs {
		if h.start > t {
			return float64(h.start-t) / 1e6
		}
	}
	return math.Inf(1)
}

func near(ts []int64, from, to int64) bool {
	for _, t := range ts {
		if t >= from && t <= to {
			return true
		}
	}
	return false
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
