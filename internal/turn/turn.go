// Package turn gives callers turns, one at a time and in arrival order, per
// key: a set of FIFO mutexes whose state exists only while a key is held or
// waited for.
//
// dlock uses it wherever callers of one process must take turns on a name:
// the acquisitions of one owner on one name (so a second Lock by the owner
// re-enters the hold the first one got), the local waiters of one name (so a
// release wakes one waiter per process, not all of them), and the etcd
// backend's one key per name and client.
package turn

import (
	"context"
	"errors"
	"sync"
)

// ErrBusy is returned by a try that found the key taken.
var ErrBusy = errors.New("turn: key is taken")

// ErrStopped is returned by TakeUntil when its stop channel closed first.
var ErrStopped = errors.New("turn: stopped")

// Mode says how Take waits.
type Mode int

const (
	// Wait waits in arrival order until the turn comes or ctx ends.
	Wait Mode = iota
	// Try takes the turn only if the key is free now.
	Try
	// TryUnlessBlocked waits as Wait does, unless the turn's present holder
	// has said (Turn.Block) that it is blocked on something outside the set;
	// then it returns ErrBusy at once.
	TryUnlessBlocked
)

// Set is a set of FIFO mutexes by key. The zero value is ready to use.
type Set[K comparable] struct {
	mu    sync.Mutex
	lines map[K]*line[K]
}

// line is one key's queue: the head holds the turn. A line is made when a
// caller finds its key free, and dropped when its queue empties; its first
// turn and the room for one waiter come with it, so an uncontended Take
// costs one allocation.
type line[K comparable] struct {
	queue   []chan struct{} // head first; a channel is closed when its turn comes
	blocked bool            // the head is blocked on something outside the set
	first   Turn[K]         // the turn of the caller that made the line
	buf     [2]chan struct{}
}

// granted is the channel of a turn given at once: closed, and never the
// channel of a waiter, so it is unique in any queue (only the head of a new
// line has it).
var granted = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Turn is a caller's turn on a key, from Take until Done.
type Turn[K comparable] struct {
	s    *Set[K]
	key  K
	line *line[K]
	ch   chan struct{}
	once sync.Once
}

// Take waits for the turn on key as mode says. It returns ErrBusy when a
// try fails, or ctx's error when ctx ends first.
func (s *Set[K]) Take(ctx context.Context, key K, mode Mode) (*Turn[K], error) {
	return s.TakeUntil(ctx, key, mode, nil)
}

// TakeUntil is Take that also gives up, with ErrStopped, when stop is
// closed first (a nil stop never is): a wait that must end when its client
// closes, with no context made for it.
func (s *Set[K]) TakeUntil(ctx context.Context, key K, mode Mode, stop <-chan struct{}) (*Turn[K], error) {
	t, err := s.take(key, mode)
	if t == nil || err != nil {
		return t, err
	}
	select {
	case <-t.ch:
		return t, nil
	default:
	}
	select {
	case <-t.ch:
		return t, nil
	case <-ctx.Done():
		t.Done() // hands the turn on if it came meanwhile
		return nil, ctx.Err()
	case <-stop:
		t.Done()
		return nil, ErrStopped
	}
}

// TryTake takes the turn on key if it is free now, with no waiting and no
// context, and reports whether it did.
func (s *Set[K]) TryTake(key K) (*Turn[K], bool) {
	t, err := s.take(key, Try)
	return t, err == nil
}

// take joins key's line as mode says; the turn's channel is closed when the
// turn is the caller's.
func (s *Set[K]) take(key K, mode Mode) (*Turn[K], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lines == nil {
		s.lines = map[K]*line[K]{}
	}
	l := s.lines[key]
	if l == nil {
		l = &line[K]{}
		l.queue = l.buf[:0]
		l.first = Turn[K]{s: s, key: key, line: l, ch: granted}
		l.queue = append(l.queue, granted)
		s.lines[key] = l
		return &l.first, nil
	}
	if mode == Try || mode == TryUnlessBlocked && l.blocked {
		return nil, ErrBusy
	}
	t := &Turn[K]{s: s, key: key, line: l, ch: make(chan struct{})}
	l.queue = append(l.queue, t.ch)
	return t, nil
}

// Block marks the turn as blocked on something outside the set (or not), for
// callers taking the key with TryUnlessBlocked.
func (t *Turn[K]) Block(blocked bool) {
	t.s.mu.Lock()
	t.line.blocked = blocked
	t.s.mu.Unlock()
}

// Done gives the turn up (or leaves the queue), handing it to the next
// caller in line. Calling it again does nothing.
func (t *Turn[K]) Done() {
	t.once.Do(func() {
		s := t.s
		s.mu.Lock()
		defer s.mu.Unlock()
		l := t.line
		for i, ch := range l.queue {
			if ch != t.ch {
				continue
			}
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			if i == 0 {
				l.blocked = false
				if len(l.queue) > 0 {
					close(l.queue[0])
				}
			}
			break
		}
		if len(l.queue) == 0 && s.lines[t.key] == l {
			delete(s.lines, t.key)
		}
	})
}

// Taken reports whether key is held or waited for.
func (s *Set[K]) Taken(key K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines[key] != nil
}

// Blocked reports whether key's present holder has said it is blocked.
func (s *Set[K]) Blocked(key K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.lines[key]
	return l != nil && l.blocked
}

// Len reports how many keys are held or waited for (for leak tests).
func (s *Set[K]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}
