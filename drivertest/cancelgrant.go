package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// 7c. A Lock whose ctx ends just as the store grants it either fails or
// returns a lease the store holds. A database driver may close a dedicated
// connection when its statement's ctx ends as the statement finishes
// (go-sql-driver does), which frees a session's locks after the grant was
// read: the lease returned was then held by nobody. The deadlines are
// spread around the measured time of an uncontended Lock so that some land
// on the grant itself.
func (s *suite) testCancelAtGrant(t *testing.T) {
	const rounds = 300
	a, b := s.client(t), s.client(t)
	base := lockName(t)
	var took []time.Duration
	for i := range 5 {
		start := time.Now()
		l := mustLock(t, a.Mutex(fmt.Sprintf("%s-m%d", base, i)))
		took = append(took, time.Since(start))
		unlock(t, l)
	}
	slices.Sort(took)
	// A staircase: shorter after a grant, longer after a refusal, so the
	// deadlines gather where the grant completes.
	d, step := took[len(took)/2], max(took[len(took)/2]/25, 10*time.Microsecond)
	granted := 0
	for round := range rounds {
		name := fmt.Sprintf("%s-%d", base, round)
		jitter := time.Duration(rand.Int64N(int64(step))) - step/2
		ctx, cancel := context.WithTimeout(t.Context(), max(d+jitter, 0))
		l, err := a.Mutex(name).Lock(ctx)
		cancel()
		if err != nil {
			d += step
			continue
		}
		d = max(d-step, 0)
		granted++
		if other, err := b.Mutex(name).TryLock(t.Context()); err == nil {
			_ = other.Unlock(t.Context())
			t.Fatalf("round %d: Lock returned a lease (token %d) that the store did not hold: another client took the lock", round, l.Token())
		}
		if err := l.Unlock(t.Context()); err != nil {
			t.Fatalf("round %d: Unlock of a lease Lock returned: %v", round, err)
		}
	}
	t.Logf("%d of %d Locks granted; deadlines ended near %v", granted, rounds, d)
}
