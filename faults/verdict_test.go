package faults

import (
	"strings"
	"testing"
	"time"
)

// hist builds a history: each hold is (worker, token, start ms, end ms, loss
// ms or 0), plus controller events.
type histHold struct {
	w                int
	tok              uint64
	start, end, loss int64
}

func history(holds []histHold, extra ...Event) []Event {
	var evs []Event
	ms := int64(time.Millisecond)
	for i, h := range holds {
		evs = append(evs, Event{Worker: h.w, Kind: kindGrant, Hold: i + 1, Token: h.tok, T: h.start * ms})
		e := Event{Worker: h.w, Kind: kindEnd, Hold: i + 1, Token: h.tok, T: h.end * ms}
		if h.loss != 0 {
			e.LossAt = h.loss * ms
		}
		evs = append(evs, e)
	}
	for _, e := range extra {
		e.T *= ms
		evs = append(evs, e)
	}
	return append(evs, Event{Worker: -1, Kind: kindInject}, Event{Worker: -1, Kind: kindFaultEnd, T: 0})
}

func judged(f *Fault, evs []Event) Result {
	r := Result{Backend: "x", Fault: f.Name, Promise: promiseOf(&Backend{TokensSafe: true}, f, 2*time.Second, &Store{Persistent: true})}
	r.judge(evs, 2*time.Second, false)
	return r
}

// The verdicts fail on the histories the findings describe, and
// pass on a clean one.
func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     *Fault
		evs   []Event
		fails string // a failure that must be reported; "" = pass
	}{
		{"clean", PauseWaiter, history([]histHold{{1, 1, 10, 20, 0}, {2, 2, 30, 40, 0}, {3, 3, 50, 60, 0}}), ""},
		{"overlap", PauseWaiter, history([]histHold{{1, 1, 10, 50, 0}, {2, 2, 30, 60, 0}}), "overlapping holds"},
		{"stale token on resume", PauseWaiter, history([]histHold{{1, 5, 10, 20, 0}, {2, 4, 30, 40, 0}}), "token regressions"},
		{"same token twice", PauseWaiter, history([]histHold{{1, 5, 10, 20, 0}, {1, 5, 30, 40, 0}}), "token regressions"},
		{"told after the next grant", BlackholeHolder, history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}}), "told after the next grant"},
		{"dead grant", PauseWaiter, history([]histHold{{1, 1, 10, 11, 11}, {2, 2, 30, 40, 0}}), "lost within 20 ms"},
		{"stuck", PauseWaiter, history([]histHold{{1, 1, -100, -50, 0}}), "after the fault ended"},
		{"paused holder, fenced", PauseHolder, history([]histHold{{1, 1, 10, 4000, 0}, {2, 2, 2500, 2600, 0}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), ""},
		{"paused holder, unfenced", PauseHolder, history([]histHold{{1, 3, 10, 4000, 0}, {2, 2, 2500, 2600, 0}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), "not ordered by token"},
		// Worker 1 was paused after its grant but before it stamped its
		// belief (the pause is recorded before SIGSTOP): its stale grant
		// begins after worker 2's, with the lower token, so it is fenced.
		{"paused before its belief, fenced", PauseWaiter, history([]histHold{{2, 2, 2500, 4000, 0}, {1, 1, 3450, 3600, 0}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), ""},
		{"paused before its belief, unfenced", PauseWaiter, history([]histHold{{2, 2, 2500, 4000, 0}, {1, 3, 3450, 3600, 0}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), "not ordered by token"},
		{"stale token after the pause", PauseWaiter, history([]histHold{{2, 2, 2500, 4000, 0}, {1, 1, 3550, 3600, 0}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), "token regressions"},
		// Worker 1 was paused after Lock had its grant but before the stamp,
		// which came after the resume was recorded: its lease says it had run
		// out, and the pause came during its Lock call (asked at 5 ms).
		{"ran out in the pause, fenced", PauseWaiter, asking(ranOut(history([]histHold{{2, 2, 2500, 3000, 0}, {1, 1, 3550, 3560, 3560}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), 1), 1, 5), ""},
		// The same without the lease's word, or without the pause, or with
		// the pause before the Lock call: a stale token and a dead grant.
		{"ran out, not said", PauseWaiter, asking(history([]histHold{{2, 2, 2500, 3000, 0}, {1, 1, 3550, 3560, 3560}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), 1, 5), "token regressions"},
		{"ran out with no pause", PauseWaiter, asking(ranOut(history([]histHold{{2, 2, 2500, 3000, 0}, {1, 1, 3550, 3560, 3560}}), 1), 1, 5),
			"lost within 20 ms"},
		{"ran out, paused before asking", PauseWaiter, asking(ranOut(history([]histHold{{2, 2, 2500, 3000, 0}, {1, 1, 3550, 3560, 3560}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 3500}), 1), 1, 25), "token regressions"},
		{"short pause excuses nothing", PauseHolder, history([]histHold{{1, 1, 10, 4000, 0}, {2, 2, 2500, 2600, 0}},
			Event{Worker: 1, Kind: kindPause, T: 20}, Event{Worker: 1, Kind: kindResume, T: 500}), "overlapping holds"},
		// A holder told of its loss 100 ms after the next grant is excused
		// (and judged by fencing) only by stalls of its own process, from
		// a loss margin (22 ms at 2 s) before that grant, at least as long
		// as it was late.
		{"told late in a stall, fenced", BlackholeHolder, history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}},
			Event{Worker: 1, Kind: kindCut, T: 20}, stall(1, 2390, 2500)), ""},
		{"told late in stalls that add up", BlackholeHolder, history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}},
			Event{Worker: 1, Kind: kindCut, T: 20}, stall(1, 2378, 2420), stall(1, 2430, 2490)), ""},
		{"told late in a stall, unfenced", BlackholeHolder, history([]histHold{{1, 3, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}},
			stall(1, 2390, 2500)), "not ordered by token"},
		{"stall shorter than the lateness", BlackholeHolder, history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}},
			stall(1, 2450, 2520)), "told after the next grant"},
		{"stall before the margin", BlackholeHolder, history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}},
			stall(1, 2000, 2377), stall(1, 2400, 2480)), "told after the next grant"},
		{"another worker's stall", BlackholeHolder, history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}},
			stall(2, 2390, 2500)), "overlapping holds"},
		// A stall excuses the late holder's overlap with the grant after it,
		// never its own grant while another held.
		{"stalled hold granted while another held", BlackholeHolder, history([]histHold{{3, 1, 5, 500, 0}, {1, 2, 10, 2500, 2500}, {2, 3, 2400, 2600, 0}},
			stall(1, 2390, 2500)), "1 overlapping holds"},
		{"slow recovery", KillHolder, history([]histHold{{1, 1, 10, 100, 0}, {2, 2, 3500, 3600, 0}},
			Event{Worker: 1, Kind: kindKill, T: 100}), "after the holder's or leader's death"},
		// The liveness bounds count only the time the store answered: the
		// fault ends at 0, the progress bound is 4 s, the next grant comes
		// at 5 s; a store stall of 1.5 s inside that wait leaves 3.5 s.
		{"slow progress", PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}}), "after the fault ended, bound"},
		{"slow progress, the store stalled", PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}}, storeStall(1000, 2500)), ""},
		{"store stalls that add up", PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}}, storeStall(500, 1200), storeStall(3000, 3700)), ""},
		{"store stalled too little", PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}}, storeStall(1000, 1900)),
			"4100 ms after the fault ended not counting 900 ms in which the store answered late"},
		{"store stalled before the fault ended", PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}}, storeStall(-2000, 500)),
			"not counting 500 ms"},
		{"store stalled after the grant", PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}}, storeStall(5000, 7000)), "5000 ms after the fault ended, bound"},
		// After a holder's death only the store's stalls past its TTL
		// count: its lease runs out by the store's clock (kill at 100 ms,
		// TTL 2 s, bound 3 s, next grant 3.4 s later).
		// A stall excuses at most half a bound: it need not be what held
		// the grant up.
		{"store stalled long, excused half the bound", PauseWaiter, history([]histHold{{1, 1, 5900, 6000, 0}}, storeStall(500, 5500)), ""},
		{"store stalled long, not enough", PauseWaiter, history([]histHold{{1, 1, 6500, 6600, 0}}, storeStall(500, 6000)),
			"4500 ms after the fault ended not counting 2000 ms"},
		{"slow recovery, the store stalled", KillHolder, history([]histHold{{1, 1, 10, 100, 0}, {2, 2, 3500, 3600, 0}},
			Event{Worker: 1, Kind: kindKill, T: 100}, storeStall(2200, 2800)), ""},
		{"slow recovery, the store stalled within the TTL", KillHolder, history([]histHold{{1, 1, 10, 100, 0}, {2, 2, 3500, 3600, 0}},
			Event{Worker: 1, Kind: kindKill, T: 100}, storeStall(200, 800)), "after the holder's or leader's death, bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := judged(tc.f, tc.evs)
			got := strings.Join(r.Fails, "; ")
			if tc.fails == "" && got != "" {
				t.Fatalf("failed: %s", got)
			}
			if tc.fails != "" && !strings.Contains(got, tc.fails) {
				t.Fatalf("want a failure %q, got %q", tc.fails, got)
			}
		})
	}
}

// The fenced view rejects a token at or below the highest seen from
// another hold, and takes repeated writes of one hold.
func TestFencedView(t *testing.T) {
	c, err := NewChecker()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, tc := range []struct {
		w, h int
		tok  uint64
		ok   bool
	}{{1, 1, 5, true}, {1, 1, 5, true}, {2, 1, 5, false}, {2, 1, 4, false}, {2, 2, 6, true}, {1, 1, 5, false}} {
		if e := c.add(Event{Worker: tc.w, Hold: tc.h, Kind: kindWrite, Token: tc.tok}); e.Accepted != tc.ok {
			t.Fatalf("write %d (worker %d, token %d): accepted %v, want %v", i, tc.w, tc.tok, e.Accepted, tc.ok)
		}
	}
}

// stall is a stall of worker w's process from ms to ms (history scales T).
func stall(w int, from, to int64) Event {
	return Event{Worker: w, Kind: kindStall, T: from, Until: to * int64(time.Millisecond)}
}

// storeStall is a stall of the store from ms to ms (history scales T).
func storeStall(from, to int64) Event {
	return Event{Worker: -1, Kind: kindStoreStall, T: from, Until: to * int64(time.Millisecond)}
}

// asking puts worker w's wait (its Lock call) at ms, before its grant.
func asking(evs []Event, w int, ms int64) []Event {
	e := Event{Worker: w, Kind: kindWait, T: ms * int64(time.Millisecond)}
	return append([]Event{e}, evs...)
}

// withModes sets the grants' modes, in hold order.
func withModes(evs []Event, modes ...string) []Event {
	i := 0
	for j := range evs {
		if evs[j].Kind == kindGrant {
			evs[j].Mode = modes[i]
			i++
		}
	}
	return evs
}

// Read-write locks and semaphores are judged by their own exclusion:
// readers may overlap, a writer may not; a semaphore may have as many
// holders as permits, and no more.
func TestJudgeKinds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lock    string
		f       *Fault
		evs     []Event
		fails   string
		permits int
	}{
		{"readers share", "rw", PauseWaiter, withModes(history([]histHold{{1, 1, 10, 50, 0}, {2, 2, 20, 60, 0}, {3, 3, 70, 80, 0}}), "r", "r", "w"), "", 0},
		{"reader during a write", "rw", PauseWaiter, withModes(history([]histHold{{1, 1, 10, 50, 0}, {2, 2, 20, 60, 0}}), "w", "r"), "overlapping holds", 0},
		{"writer during reads", "rw", PauseWaiter, withModes(history([]histHold{{1, 1, 10, 50, 0}, {2, 2, 20, 60, 0}}), "r", "w"), "overlapping holds", 0},
		{"write token below an earlier read's", "rw", PauseWaiter, asking(withModes(history([]histHold{{1, 5, 10, 20, 0}, {2, 4, 30, 40, 0}}), "r", "w"), 2, 25), "token regressions", 0},
		{"concurrent reads reported out of order", "rw", PauseWaiter, asking(withModes(history([]histHold{{1, 5, 10, 40, 0}, {2, 4, 11, 40, 0}}), "r", "r"), 2, 5), "", 0},
		{"a permit granted first, returned after another's end", "semaphore", PauseWaiter, asking(withModes(history([]histHold{{1, 5, 10, 20, 0}, {2, 4, 30, 40, 0}}), "p", "p"), 2, 5), "", 2},
		{"a permit asked for after another's grant, with a lower token", "semaphore", PauseWaiter, asking(withModes(history([]histHold{{1, 5, 10, 20, 0}, {2, 4, 30, 40, 0}}), "p", "p"), 2, 15), "token regressions", 2},
		{"reader told after the writer's grant", "rw", BlackholeHolder, withModes(history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 2400, 2600, 0}}), "r", "w"), "told after the next grant", 0},
		{"two permits of two", "semaphore", PauseWaiter, withModes(history([]histHold{{1, 1, 10, 50, 0}, {2, 2, 20, 60, 0}, {3, 3, 55, 80, 0}}), "p", "p", "p"), "", 2},
		{"three permits of two", "semaphore", PauseWaiter, withModes(history([]histHold{{1, 1, 10, 50, 0}, {2, 2, 20, 60, 0}, {3, 3, 30, 80, 0}}), "p", "p", "p"), "overlapping holds", 2},
		{"permit told after the grant past the limit", "semaphore", BlackholeHolder, withModes(history([]histHold{{1, 1, 10, 2500, 2500}, {2, 2, 20, 3000, 0}, {3, 3, 2400, 2600, 0}}), "p", "p", "p"), "told after the next grant", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Backend: "x", Fault: tc.f.Name, Lock: tc.lock, Permits: tc.permits,
				Promise: promiseOf(&Backend{TokensSafe: true}, tc.f, 2*time.Second, &Store{Persistent: true})}
			r.judge(tc.evs, 2*time.Second, false)
			got := strings.Join(r.Fails, "; ")
			if tc.fails == "" && got != "" {
				t.Fatalf("failed: %s", got)
			}
			if tc.fails != "" && !strings.Contains(got, tc.fails) {
				t.Fatalf("want a failure %q, got %q", tc.fails, got)
			}
		})
	}
}

// ranOut marks worker w's grants as stamped after their lease ran out
// (Event.RanOut).
func ranOut(evs []Event, w int) []Event {
	for i := range evs {
		if evs[i].Worker == w && evs[i].Kind == kindGrant {
			evs[i].RanOut = true
		}
	}
	return evs
}

// The store's stalls are counted apart from the workers' and reported
// beside the wait they were taken out of.
func TestStoreStallFigures(t *testing.T) {
	r := judged(PauseWaiter, history([]histHold{{1, 1, 5000, 5100, 0}},
		stall(1, 100, 130), storeStall(1000, 2500), storeStall(6000, 6100)))
	if r.Stalls != 1 || r.StallMs != 30 {
		t.Errorf("worker stalls: %d, %.0f ms; want 1, 30 ms", r.Stalls, r.StallMs)
	}
	if r.StoreStalls != 2 || r.StoreStallMs != 1600 {
		t.Errorf("store stalls: %d, %.0f ms; want 2, 1600 ms", r.StoreStalls, r.StoreStallMs)
	}
	if r.ProgressMs != 3500 || r.StoreProgressMs != 1500 {
		t.Errorf("progress %.0f ms (+%.0f the store stalled), want 3500 (+1500)", r.ProgressMs, r.StoreProgressMs)
	}
	if want := "progress 5000 ms, bound 4s, met leaving out 1500 ms of store stalls"; len(r.StoreExcused) != 1 || r.StoreExcused[0] != want {
		t.Errorf("excused: %q, want [%q]", r.StoreExcused, want)
	}
	if v := Verdict(r); !strings.Contains(v, "pass (progress 5000 ms") {
		t.Errorf("verdict %q does not say the pass was excused", v)
	}
	if r := judged(PauseWaiter, history([]histHold{{1, 1, 3000, 3100, 0}}, storeStall(1000, 2500))); len(r.StoreExcused) != 0 || Verdict(r) != "pass" {
		t.Errorf("a bound met without the store's stalls: excused %q, verdict %q", r.StoreExcused, Verdict(r))
	}
}
