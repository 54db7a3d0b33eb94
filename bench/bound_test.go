package main

import (
	"math"
	"testing"
	"time"
)

// The simulation's mutex and semaphore have closed forms: one hold per
// hold+handoff, and permits times that. The read-write lock lies between
// the reads-only overlap of a batch and 1/(2·writes - writes²) phases.
func TestSimulateBounds(t *testing.T) {
	hold, handoff, span := 1200*time.Microsecond, 300*time.Microsecond, 30*time.Second
	m := simulate("mutex", hold, handoff, 0.1, 4, span)
	if want := 1 / (hold + handoff).Seconds(); math.Abs(m-want) > want*0.01 {
		t.Fatalf("mutex: %.0f holds/s, want %.0f", m, want)
	}
	if s := simulate("sem", hold, handoff, 0.1, 4, span); math.Abs(s/m-4) > 0.05 {
		t.Fatalf("semaphore of 4: %.2f× the mutex, want 4×", s/m)
	}
	r := simulate("rw", hold, handoff, 0.1, 4, span)
	if lim := 1 / (2*0.1 - 0.1*0.1); r/m < 4 || r/m > lim {
		t.Fatalf("rw, 10%% writes: %.2f× the mutex, want within [4, %.2f]", r/m, lim)
	}
	if all := simulate("rw", hold, handoff, 0, 4, span); math.Abs(all/m-kindWorkers) > 0.1 {
		t.Fatalf("rw, no writes: %.2f× the mutex, want %d× (every worker inside)", all/m, kindWorkers)
	}
}

// The ceiling drawn on bench-kinds.svg is the one docs/benchmarks.md
// proves: 4.78× for the read-write scenario, 4× for the semaphore of 4.
func TestKindsCeiling(t *testing.T) {
	if c := kindsCeiling(scRW); math.Abs(c-4.78) > 0.01 {
		t.Errorf("read-write ceiling %.3f×, want 4.78×", c)
	}
	if c := kindsCeiling(scSem); math.Abs(c-4) > 0.05 {
		t.Errorf("semaphore ceiling %.3f×, want 4×", c)
	}
	if c := kindsCeiling("other"); c != 0 {
		t.Errorf("ceiling of another scenario %.3f×, want none", c)
	}
}
