package keepalive

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"go.uber.org/goleak"
)

// watchScheduler is a Scheduler for holds that only a session's end ends
// (their TTL is an hour); each hold it declares lost is sent on the
// returned channel.
func watchScheduler(t *testing.T) (*Scheduler, <-chan *Entry) {
	t.Helper()
	lost := make(chan *Entry, 16)
	var s *Scheduler
	s = NewScheduler(renewDriver{}, func(*Entry) driver.Held { return driver.Held{Name: "x", TTL: time.Hour} },
		func(e *Entry, err error) {
			if !errors.Is(err, driver.ErrLeaseLost) {
				t.Errorf("lost with %v; want ErrLeaseLost", err)
			}
			s.Remove(e)
			lost <- e
		},
		func(*Entry, time.Duration, error) {})
	return s, lost
}

func sessionHold(ch <-chan struct{}) *Entry { return &Entry{TTL: time.Hour, Renew: true, Lost: ch} }

func (s *Scheduler) watcherOf(ch <-chan struct{}) *watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchers[ch]
}

func waitLost(t *testing.T, lost <-chan *Entry, want *Entry) {
	t.Helper()
	select {
	case e := <-lost:
		if e != want {
			t.Fatalf("another hold declared lost")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hold of an ended session was not declared lost")
	}
}

// idleSession gives a watchScheduler whose session ch had a hold and has
// none now, and the watcher the hold started; the test's end stops the
// scheduler and checks that no goroutine is left.
func idleSession(t *testing.T) (*Scheduler, <-chan *Entry, chan struct{}, *watcher) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
	s, lost := watchScheduler(t)
	t.Cleanup(s.Stop)
	ch := make(chan struct{})
	first := sessionHold(ch)
	s.Add(first, time.Now(), time.Hour)
	w := s.watcherOf(ch)
	s.Remove(first)
	return s, lost, ch, w
}

// A session's watcher stays when its last hold goes, and the session's
// next hold (an uncontended Lock after an Unlock) uses it: no goroutine is
// started and stopped per Lock.
func TestWatcherOutlivesItsHolds(t *testing.T) {
	s, lost, ch, w := idleSession(t)
	if s.watcherOf(ch) != w {
		t.Fatal("the watcher went with its last hold")
	}
	next := sessionHold(ch)
	s.Add(next, time.Now(), time.Hour)
	if s.watcherOf(ch) != w {
		t.Fatal("the session's next hold started another watcher")
	}
	close(ch)
	waitLost(t, lost, next)
}

// A hold granted in a session that has just ended, added after the
// session's idle watcher saw the end, is still declared lost: the watcher
// that saw the end is not the one the hold joins.
func TestHoldAddedAfterSessionEndIsLost(t *testing.T) {
	s, lost, ch, _ := idleSession(t)
	close(ch)
	for deadline := time.Now().Add(10 * time.Second); s.watcherOf(ch) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watcher of an ended session stayed")
		}
	}
	late := sessionHold(ch)
	s.Add(late, time.Now(), time.Hour)
	waitLost(t, lost, late)
}

// Idle watchers are bounded: beyond maxIdleWatchers, the longest idle are
// stopped, and Stop stops the rest.
func TestIdleWatchersAreBounded(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, _ := watchScheduler(t)
	chs := make([]chan struct{}, maxIdleWatchers+3)
	for i := range chs {
		chs[i] = make(chan struct{})
		h := sessionHold(chs[i])
		s.Add(h, time.Now(), time.Hour)
		s.Remove(h)
	}
	for i, ch := range chs {
		if kept, want := s.watcherOf(ch) != nil, i >= 3; kept != want {
			t.Errorf("watcher %d (of %d, in the order they went idle) kept = %v; want %v", i, len(chs), kept, want)
		}
	}
	s.mu.Lock()
	if s.idle != maxIdleWatchers {
		t.Errorf("idle = %d; want %d", s.idle, maxIdleWatchers)
	}
	s.mu.Unlock()
	s.Stop()
}

// A hold added after Stop (a grant racing Client.Close past its drain)
// and then removed leaves no watcher running: Stop has already stopped
// the watchers, and no one would stop an idle one started after it.
// (Found by an adversary pass.)
func TestNoWatcherAfterStop(t *testing.T) {
	defer goleak.VerifyNone(t)
	s, _ := watchScheduler(t)
	s.Stop()
	h := sessionHold(make(chan struct{}))
	s.Add(h, time.Now(), time.Hour)
	s.Remove(h)
}
