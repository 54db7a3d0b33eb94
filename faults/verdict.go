package faults

import (
	"fmt"
	"math"
	"slices"
	"time"
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
	Excused    int // overlaps excused by the fault (a holder paused past its TTL, a killed connection)
	Unfenced   int // excused overlaps whose holder not excused (the newer) had no higher token
	Stale      int // writes the fenced view rejected
	// MinMarginMs is the smallest loss-signal margin: a holder's Done
	// before the next holder's grant, in ms (NaN: no loss observed).
	MinMarginMs float64
	Losses      int     // holds that ended by loss
	LateLosses  int     // of which the next holder was granted first
	RecoveryMs  float64 // the longest time from a holder's kill or cut, or a leader's kill, to the next grant (NaN: none)
	ProgressMs  float64 // the longest time from a fault's end to the next grant
	Regressions int     // grants whose token was not above every earlier grant's
	DeadGrants  int     // leases lost within 20 ms of Lock returning, with no fault to explain it

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
}

type window struct {
	worker   int
	from, to int64
}

// judge computes the figures from the history and the verdicts against the
// promise.
// connDeath: a holder whose connection dies (killed, or the server killed)
// is excused, as SQL row/session modes' docs say fencing covers that window.
func (r *Result) judge(evs []Event, ttl time.Duration, connDeath bool) {
	var last int64
	holds := map[holdID]*holdRec{}
	open := map[int]*holdRec{} // by worker
	var pauses, targets []window
	pausedAt := map[int]int64{}
	asked := map[int]int64{} // by worker: its last wait
	var faultEnds, deaths []int64
	var srvEvents []int64
	for _, e := range evs {
		last = max(last, e.T, e.Recv)
		switch e.Kind {
		case kindGrant:
			h := &holdRec{id: e.id(), mode: e.Mode, asked: asked[e.Worker], token: e.Token, start: e.T}
			holds[h.id], open[e.Worker] = h, h
		case kindEnd:
			if h := holds[e.id()]; h != nil {
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
			deaths = append(deaths, e.T)
		case kindPause:
			pausedAt[e.Worker] = e.T
		case kindResume:
			pauses = append(pauses, window{e.Worker, pausedAt[e.Worker], e.T})
		case kindConnKill, kindCut:
			srvEvents = append(srvEvents, e.T)
			if e.Kind == kindConnKill {
				targets = append(targets, window{e.Worker, e.T, e.T})
			} else {
				deaths = append(deaths, e.T) // to the store, a cut-off holder is dead
			}
		case kindSrvKill:
			srvEvents = append(srvEvents, e.T)
			targets = append(targets, window{-1, e.T, e.T})
			if r.Fault == KillLeader.Name {
				deaths = append(deaths, e.T)
			}
		case kindFaultEnd:
			faultEnds = append(faultEnds, e.T)
		case kindInject:
			r.Injections++
		}
	}
	var hs []*holdRec
	for _, h := range holds {
		if h.end == 0 {
			h.end = last // believed until the end
		}
		for _, w := range pauses {
			if w.worker == h.id.worker && w.to-w.from > int64(ttl) && w.from < h.end && w.to > h.start {
				h.excused = true
				// Paused between its grant and the stamp of its belief
				// (a pause is recorded before SIGSTOP and after SIGCONT):
				// its belief begins later than its grant did.
				h.pausedIn = h.pausedIn || w.from <= h.start
			}
		}
		if connDeath {
			for _, w := range targets {
				if (w.worker == h.id.worker || w.worker == -1) && w.from >= h.start && w.from <= h.end {
					h.excused = true
				}
			}
		}
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b *holdRec) int { return cmpInt(a.start, b.start) })
	r.Holds = len(hs)

	// Conflicts, and token order where excused.
	for i, b := range hs {
		var live []*holdRec // holds believed when b was granted
		for _, a := range hs[:i] {
			if a.end > b.start {
				live = append(live, a)
			}
		}
		if r.Lock == "semaphore" {
			if len(live)+1 > r.Permits {
				if b.excused || slices.ContainsFunc(live, func(a *holdRec) bool { return a.excused }) {
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
			if a.excused || b.excused {
				r.Excused++
				// The stale holder is the excused one: the other, granted
				// after its lease ran out, must have the higher token. It
				// is b when its worker was paused before it could stamp
				// its belief's start.
				stale, fresh := a, b
				if b.excused && !a.excused {
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
	// Token regressions, in grant order: a mutex's grants all increase. The
	// other kinds' concurrent grants may be reported out of order (a grant
	// made first in the store can return later), so a grant must be above
	// every grant returned before its Lock call began: the store made those
	// first.
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
	// Loss margins: Done before the next conflicting grant.
	r.MinMarginMs = math.NaN()
	for i, h := range hs {
		if h.loss == 0 || h.excused {
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
	r.RecoveryMs = math.NaN()
	if len(deaths) > 0 {
		r.RecoveryMs = 0
		for _, t := range deaths {
			r.RecoveryMs = math.Max(r.RecoveryMs, nextGrant(hs, t))
		}
	}
	for _, t := range faultEnds {
		r.ProgressMs = math.Max(r.ProgressMs, nextGrant(hs, t))
	}

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
	if p.Recovery > 0 && !(r.RecoveryMs <= ms(p.Recovery)) {
		fail("next grant %.0f ms after the holder's or leader's death, bound %v", r.RecoveryMs, p.Recovery)
	}
	if !(r.ProgressMs <= ms(p.Progress)) {
		fail("next grant %.0f ms after the fault ended, bound %v", r.ProgressMs, p.Progress)
	}
	if r.DeadGrants > 0 {
		fail("%d leases lost within 20 ms of their grant", r.DeadGrants)
	}
	if r.Injections == 0 {
		fail("no fault injected")
	}
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
