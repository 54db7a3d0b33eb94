package core

import "sync"

// Releases tracks, per key (a client's name, owner and kind), the store
// release under way of a hold the client has detached, so that a new
// acquisition under the key waits for it (Await, which is in acquire.go,
// on the path that waits): the store would otherwise grant
// it as a re-entry of the hold the release then deletes. It has a lock of
// its own, which its callers may take while holding theirs, never the
// reverse. The zero value is ready to use.
type Releases[K comparable] struct {
	mu sync.Mutex
	m  map[K]*Release
}

// Release is one store release under way; its holder keeps it (in the hold
// it releases), so tracking one costs no allocation unless someone waits.
type Release struct {
	done chan struct{} // made by the first who waits; closed by End
}

// Begin records that the release r of a hold under k has begun: the key's
// latest release, which Await waits for.
func (s *Releases[K]) Begin(k K, r *Release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[K]*Release{}
	}
	s.m[k] = r
}

// End records that the release r under k is done, and wakes its waiters.
func (s *Releases[K]) End(k K, r *Release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[k] == r {
		delete(s.m, k)
	}
	if r.done != nil {
		close(r.done)
	}
}

// Len reports how many releases are under way (for leak tests).
func (s *Releases[K]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
