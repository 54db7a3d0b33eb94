package memlock

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// Read-write locks and semaphores. Each family (Mutex, RWMutex, Semaphore)
// of a name has its own holds and its own token counter, so the three locks
// of one name are independent.
//
// A queue without a blocking call: a read or write request refused because
// of other holds or earlier waiters leaves a waiting record with its arrival
// number, valid for waitRecord (or its TTL if shorter) and renewed by its
// next attempt (Grant.Retry tells it to come back within half that time). A
// read is granted when no writer holds and no writer waits ahead of it; a
// write when nobody holds and nobody waits ahead of it. So a waiting writer
// keeps later readers out, and readers that waited before a writer go
// before it: neither kind starves. A waiter that gives up drops its record
// (dlock releases the owner with token 0); one that dies holds the ones
// behind it back for at most that long; a refused TryLock leaves no record
// (driver.Request.Try).
const waitRecord = 2 * time.Second

// kindHold is one owner's hold of a read-write lock or a permit.
type kindHold struct {
	kind    driver.Kind
	label   string
	holds   int
	token   uint64
	expires time.Time
}

// kindLock is a read-write lock or a semaphore.
type kindLock struct {
	limit   int                  // a semaphore's permit count
	holds   map[string]*kindHold // by owner
	waiters map[string]*waiter   // waiting readers and writers, by owner
}

// waiter is the record of a refused read or write request.
type waiter struct {
	kind    driver.Kind
	seq     uint64 // arrival order
	expires time.Time
}

// familyKey is the key of a read-write lock's or semaphore's state and
// token counter: names have no NUL byte, so it cannot be a Mutex's name.
func familyKey(name string, k driver.Kind) string {
	if k == driver.Permit {
		return "\x00sem\x00" + name
	}
	return "\x00rw\x00" + name
}

// kind returns the live state of key, dropping expired holds and writer
// records. s.mu must be held.
func (s *store) kind(key string, now time.Time) *kindLock {
	l := s.kinds[key]
	if l == nil {
		l = &kindLock{holds: map[string]*kindHold{}, waiters: map[string]*waiter{}}
		s.kinds[key] = l
	}
	for o, h := range l.holds {
		if !now.Before(h.expires) {
			delete(l.holds, o)
		}
	}
	for o, w := range l.waiters {
		if !now.Before(w.expires) {
			delete(l.waiters, o)
		}
	}
	return l
}

// tidy drops key's state once it has nothing live. s.mu must be held.
func (s *store) tidy(key string, l *kindLock) {
	if len(l.holds) == 0 && len(l.waiters) == 0 {
		delete(s.kinds, key)
	}
}

// soonest is the time left on the lease of l's hold that ends first.
func (l *kindLock) soonest(now time.Time) time.Duration {
	var d time.Duration
	for _, h := range l.holds {
		if left := h.expires.Sub(now); d == 0 || left < d {
			d = left
		}
	}
	return d
}

func (s *store) acquireKind(req driver.Request) (driver.Grant, error) {
	now := time.Now()
	key := familyKey(req.Name, req.Kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.kind(key, now)
	defer s.tidy(key, l)
	h := l.holds[req.Owner]
	if h != nil && h.kind != req.Kind {
		return driver.Grant{}, fmt.Errorf("memlock: %w: %q is held by this owner as %v, asked as %v",
			dlock.ErrUnsupported, req.Name, h.kind, req.Kind)
	}
	if h == nil {
		ok := true
		var seq uint64
		if w := l.waiters[req.Owner]; w != nil {
			seq = w.seq
		} else if req.Kind != driver.Permit {
			s.seq++
			seq = s.seq
		}
		switch req.Kind {
		case driver.Shared, driver.Write:
			for o, x := range l.holds {
				ok = ok && o != req.Owner && req.Kind == driver.Shared && x.kind == driver.Shared
			}
			for o, w := range l.waiters { // nobody (for a read: no writer) waiting ahead
				ok = ok && (o == req.Owner || w.seq > seq || req.Kind == driver.Shared && w.kind == driver.Shared)
			}
			if !ok && req.Try { // a single attempt keeps no place
				var retry time.Duration
				if len(l.holds) > 0 {
					retry = l.soonest(now)
				}
				return driver.Grant{Retry: retry}, nil
			}
			if !ok { // keep our place
				life := min(req.TTL, waitRecord)
				l.waiters[req.Owner] = &waiter{kind: req.Kind, seq: seq, expires: now.Add(life)}
				retry := life / 2
				if len(l.holds) > 0 {
					retry = min(retry, l.soonest(now))
				}
				return driver.Grant{Retry: retry}, nil
			}
			delete(l.waiters, req.Owner)
		case driver.Permit:
			if len(l.holds) > 0 && req.Limit != l.limit {
				return driver.Grant{}, fmt.Errorf("memlock: %w: %q has %d permits held with a count of %d, asked with %d",
					dlock.ErrLimitMismatch, req.Name, len(l.holds), l.limit, req.Limit)
			}
			l.limit = req.Limit
			ok = len(l.holds) < req.Limit
		}
		if !ok {
			return driver.Grant{Retry: l.soonest(now)}, nil
		}
		s.tokens[key]++
		h = &kindHold{kind: req.Kind, label: req.Label, token: s.tokens[key]}
		l.holds[req.Owner] = h
	} else if req.Kind == driver.Permit && req.Limit != l.limit {
		return driver.Grant{}, fmt.Errorf("memlock: %w: %q has permits held with a count of %d, asked with %d",
			dlock.ErrLimitMismatch, req.Name, l.limit, req.Limit)
	}
	h.holds++
	h.expires = later(h.expires, now.Add(req.TTL))
	return driver.Grant{Acquired: true, Token: h.token, Holds: h.holds}, nil
}

// liveKind returns the hold h names, or nil if it is gone. s.mu must be held.
func (s *store) liveKind(h driver.Held, now time.Time) (string, *kindLock, *kindHold) {
	key := familyKey(h.Name, h.Kind)
	l := s.kind(key, now)
	x := l.holds[h.Owner]
	if x == nil || x.token != h.Token || x.kind != h.Kind {
		s.tidy(key, l)
		return key, l, nil
	}
	return key, l, x
}

func (s *store) renewKind(h driver.Held, now time.Time) error {
	_, _, x := s.liveKind(h, now)
	if x == nil {
		return dlock.ErrLeaseLost
	}
	x.expires = later(x.expires, now.Add(h.TTL))
	return nil
}

func (s *store) releaseKind(h driver.Held, count int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, l, x := s.liveKind(h, time.Now())
	if x == nil {
		if _, ok := l.waiters[h.Owner]; ok && h.Token == 0 { // a wait given up
			delete(l.waiters, h.Owner)
			s.tidy(key, l)
			s.notify(h.Name)
		}
		return 0, dlock.ErrLeaseLost
	}
	x.holds -= count
	if x.holds > 0 {
		return x.holds, nil
	}
	delete(l.holds, h.Owner)
	s.tidy(key, l)
	s.notify(h.Name)
	return 0, nil
}

func (s *store) inspectKind(name string, kind driver.Kind) driver.Info {
	now := time.Now()
	key := familyKey(name, kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.kind(key, now)
	defer s.tidy(key, l)
	info := driver.Info{Name: name, Kind: kind, Waiters: len(l.waiters), Limit: l.limit}
	for o, h := range l.holds {
		info.Holders = append(info.Holders, driver.Holder{Owner: o, Label: h.label, Kind: h.kind, Token: h.token,
			Holds: h.holds, TTL: h.expires.Sub(now)})
	}
	slices.SortFunc(info.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Token, b.Token) })
	if n := len(info.Holders); n > 0 {
		top := info.Holders[n-1] // a writer is alone, else the latest hold
		info.Held, info.Kind = true, top.Kind
		info.Owner, info.Label, info.Holds, info.Token, info.TTL = top.Owner, top.Label, top.Holds, top.Token, top.TTL
	}
	return info
}

// forceReleaseKind drops the holds of name's read-write lock or semaphore
// whose tokens are in tokens, or every hold if it is empty; waiters keep
// their records, and the token counter goes on.
func (s *store) forceReleaseKind(name string, kind driver.Kind, tokens []uint64) {
	key := familyKey(name, kind)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.kinds[key]
	if l == nil {
		return
	}
	dropped := false
	for o, h := range l.holds {
		if len(tokens) == 0 || slices.Contains(tokens, h.token) {
			delete(l.holds, o)
			dropped = true
		}
	}
	s.tidy(key, l)
	if dropped {
		s.notify(name)
	}
}

var _ driver.KindForceReleaser = (*Driver)(nil)
