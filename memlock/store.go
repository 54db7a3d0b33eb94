package memlock

import (
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// store is one in-process lock store.
type store struct {
	name string
	refs int // clients using a named store; guarded by named.mu

	mu     sync.Mutex
	locks  map[string]*entry
	tokens map[string]uint64    // per-name counters; they outlive the locks
	kinds  map[string]*kindLock // read-write locks and semaphores, by familyKey
	seq    uint64               // arrival numbers of waiting records
	subs   map[string]map[*subscription]struct{}
}

type entry struct {
	owner   string
	label   string
	holds   int
	token   uint64
	expires time.Time
}

func newStore(name string) *store {
	return &store{name: name, locks: map[string]*entry{}, tokens: map[string]uint64{}, kinds: map[string]*kindLock{},
		subs: map[string]map[*subscription]struct{}{}}
}

// live returns the unexpired entry of name, dropping an expired one silently.
// s.mu must be held.
func (s *store) live(name string, now time.Time) *entry {
	e := s.locks[name]
	if e != nil && !now.Before(e.expires) {
		delete(s.locks, name)
		return nil
	}
	return e
}

func (s *store) acquire(req driver.Request) driver.Grant {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(req.Name, now)
	switch {
	case e == nil:
		s.tokens[req.Name]++
		e = &entry{owner: req.Owner, label: req.Label, token: s.tokens[req.Name]}
		s.locks[req.Name] = e
	case e.owner != req.Owner:
		return driver.Grant{Retry: e.expires.Sub(now)}
	}
	e.holds++
	e.expires = later(e.expires, now.Add(req.TTL))
	return driver.Grant{Acquired: true, Token: e.token, Holds: e.holds}
}

// later is the expiry a hold gets when a lease asks for want: never earlier
// than its current one, cur (zero for a new hold). Other leases of a
// re-entered hold, maybe in other clients of the owner, count on cur, and a
// renewal may land after the release of the hold it renews.
func later(cur, want time.Time) time.Time {
	if cur.After(want) {
		return cur
	}
	return want
}

func (s *store) renew(batch []driver.Held, res []driver.RenewResult) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range batch {
		if h.Kind != driver.Exclusive {
			res[i].Err = s.renewKind(h, now)
			continue
		}
		e := s.live(h.Name, now)
		if e == nil || e.owner != h.Owner || e.token != h.Token {
			res[i].Err = dlock.ErrLeaseLost
			continue
		}
		e.expires = later(e.expires, now.Add(h.TTL))
	}
}

func (s *store) release(name, owner string, token uint64, count int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(name, time.Now())
	if e == nil || e.owner != owner || e.token != token {
		return 0, dlock.ErrLeaseLost
	}
	e.holds -= count
	if e.holds > 0 {
		return e.holds, nil
	}
	delete(s.locks, name)
	s.notify(name)
	return 0, nil
}

func (s *store) forceRelease(name string, token uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.locks[name]; ok && (token == 0 || e.token == token) {
		delete(s.locks, name)
		s.notify(name)
	}
}

func (s *store) inspect(name string) driver.Info {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.live(name, now)
	if e == nil {
		return driver.Info{Name: name}
	}
	return driver.Info{Name: name, Held: true, Owner: e.owner, Label: e.label, Holds: e.holds, Token: e.token, TTL: e.expires.Sub(now)}
}

// notify wakes the subscribers of name. s.mu must be held.
func (s *store) notify(name string) {
	for sub := range s.subs[name] {
		select {
		case sub.c <- struct{}{}:
		default:
		}
	}
}

type subscription struct {
	s    *store
	name string
	c    chan struct{}
	once sync.Once
}

func (s *store) subscribe(name string) *subscription {
	sub := &subscription{s: s, name: name, c: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[name] == nil {
		s.subs[name] = map[*subscription]struct{}{}
	}
	s.subs[name][sub] = struct{}{}
	return sub
}

func (sub *subscription) C() <-chan struct{} { return sub.c }

func (sub *subscription) Close() error {
	sub.once.Do(func() {
		s := sub.s
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.subs[sub.name], sub)
		if len(s.subs[sub.name]) == 0 {
			delete(s.subs, sub.name)
		}
	})
	return nil
}
