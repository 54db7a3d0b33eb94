package keepalive

import "time"

// State is what the Scheduler believes of an entry, for tests and
// diagnostics.
type State struct {
	Removed  bool      // unscheduled for good
	Expiry   time.Time // the store keeps the hold at least until then
	Deadline time.Time // loss is signalled then, a margin before Expiry
	Renewals uint64    // renewal results recorded
}

func (s *Scheduler) state(e *Entry) State {
	st := State{Removed: e.removed, Renewals: e.renewals}
	if e.added {
		st.Expiry, st.Deadline = e.expiry.time(), e.deadline.time()
	}
	return st
}

// State returns what the Scheduler believes of e now.
func (s *Scheduler) State(e *Entry) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state(e)
}

// Snapshot calls f with the Scheduler stopped in its tracks: every state f
// reads through state is of one moment, and no renewal result is recorded
// meanwhile. f must not call the Scheduler.
func (s *Scheduler) Snapshot(f func(state func(*Entry) State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.state)
}

// Len reports how many entries are scheduled (for leak tests).
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h)
}

// WaitRenewals waits for the renewals in flight to be recorded.
func (s *Scheduler) WaitRenewals() { s.flights.Wait() }

// SetDeadline moves e's loss deadline to d, as if the process had slept
// until past it: for tests of what a caller sees of a lease whose deadline
// passed before any tick ran.
func (s *Scheduler) SetDeadline(e *Entry, d time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.deadline = at(d)
}
