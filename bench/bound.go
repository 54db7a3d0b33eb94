package main

import (
	"container/heap"
	"fmt"
	"io"
	"math/rand/v2"
	"time"
)

// The best the kinds scenarios can give: a simulation of kindWorkers
// workers, each holding what it got for hold and asking again at once,
// with grants taking handoff from the release that allows them, under the
// rules the issue asks for: waiters granted in arrival order, a waiting
// writer blocking the readers that arrive after it, a semaphore granting
// while it has a free permit. No store, no CPU: only the rules.

type simEvent struct {
	at     time.Duration
	worker int
	write  bool
}

type simQueue []simEvent

func (q simQueue) Len() int           { return len(q) }
func (q simQueue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q simQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)        { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() any          { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }
func (q *simQueue) add(e simEvent)    { heap.Push(q, e) }
func (q *simQueue) next() simEvent    { return heap.Pop(q).(simEvent) }
func (q simQueue) empty() bool        { return len(q) == 0 }
func newSimQueue() *simQueue          { q := &simQueue{}; heap.Init(q); return q }

// simulate returns holds per second of one kind ("mutex", "rw" with
// writes as the share of write holds, or "sem" with permits) over span.
func simulate(kind string, hold, handoff time.Duration, writes float64, permits int, span time.Duration) float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	wantsWrite := func() bool { return kind == "mutex" || (kind == "rw" && rng.Float64() < writes) }
	type waiter struct {
		worker int
		write  bool
	}
	var waiting []waiter
	for w := range kindWorkers {
		waiting = append(waiting, waiter{w, wantsWrite()})
	}
	readers, writer, inside := 0, false, 0
	ev := newSimQueue()
	grant := func(now time.Duration) {
		for len(waiting) > 0 {
			w := waiting[0]
			switch {
			case kind == "sem":
				if inside == permits {
					return
				}
				inside++
			case w.write:
				if readers > 0 || writer {
					return
				}
				writer = true
			default:
				if writer {
					return
				}
				readers++
			}
			waiting = waiting[1:]
			ev.add(simEvent{at: now + handoff + hold, worker: w.worker, write: w.write})
		}
	}
	grant(0)
	holds := 0
	for !ev.empty() {
		e := ev.next()
		if e.at > span {
			break
		}
		holds++
		switch {
		case kind == "sem":
			inside--
		case e.write:
			writer = false
		default:
			readers--
		}
		waiting = append(waiting, waiter{e.worker, wantsWrite()})
		grant(e.at)
	}
	return float64(holds) / span.Seconds()
}

// printBounds writes the best ratios for a few holds and handoffs.
func printBounds(w io.Writer) {
	fmt.Fprintf(w, "%d workers, 10%% writes, 4 permits; grants in arrival order, a waiting writer blocks later readers\n\n", kindWorkers)
	fmt.Fprintln(w, "| hold | handoff | mutex holds/s | rw holds/s | rw ÷ mutex | semaphore holds/s | semaphore ÷ mutex |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, c := range []struct{ hold, handoff time.Duration }{
		{1200 * time.Microsecond, 0}, {1200 * time.Microsecond, 300 * time.Microsecond},
		{1300 * time.Microsecond, 1200 * time.Microsecond}, {10 * time.Millisecond, time.Millisecond},
	} {
		span := 60 * time.Second
		m := simulate("mutex", c.hold, c.handoff, 0.1, 4, span)
		r := simulate("rw", c.hold, c.handoff, 0.1, 4, span)
		s := simulate("sem", c.hold, c.handoff, 0.1, 4, span)
		fmt.Fprintf(w, "| %v | %v | %.0f | %.0f | %.2f× | %.0f | %.2f× |\n", c.hold, c.handoff, m, r, r/m, s, s/m)
	}
}

// kindsCeiling is the best ratio to the mutex a kinds scenario (scRW or
// scSem) can give under its rules: its simulation with the benchmark's
// hold and an instant handoff (0 for another scenario).
func kindsCeiling(sc string) float64 {
	kind := map[string]string{scRW: "rw", scSem: "sem"}[sc]
	if kind == "" {
		return 0
	}
	const hold, span = 1200 * time.Microsecond, 60 * time.Second
	m := simulate("mutex", hold, 0, 0.1, 4, span)
	return simulate(kind, hold, 0, 0.1, 4, span) / m
}
