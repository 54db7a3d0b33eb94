package etcdlock

import "testing"

// A session found lost frees its holds' slots before it closes lost: a
// holder told of the loss (through lost, or a renewal that finds it
// closed) may take the name again at once, and found its lost hold's slot
// still taken when lost was closed first (TestLeaseRevoked, once, on a
// loaded machine: "held by another owner").
func TestLostSessionFreesSlotsFirst(t *testing.T) {
	s := &session{lost: make(chan struct{}), cancel: func() {}, done: make(chan struct{})}
	freed, lostFirst := false, false
	l := &Lease{sess: s, free: func() { freed, lostFirst = true, s.isLost() }}
	s.track(l)
	s.markLost()
	if !freed || lostFirst {
		t.Fatalf("slot freed = %v, after lost was closed = %v; want freed before", freed, lostFirst)
	}
	late := &Lease{sess: s, free: func() {}}
	s.track(late)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.holds) != 0 {
		t.Error("a hold tracked by a lost session")
	}
}
