package redislock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// BenchmarkKindsUncontended: one goroutine taking and releasing one hold of
// each kind: the cost of the kinds' scripts against the mutex's.
func BenchmarkKindsUncontended(b *testing.B) {
	srv := testserver.Redis(b)
	c, _ := benchClient(b, srv)
	ctx := b.Context()
	for _, k := range []struct {
		name string
		lock func(context.Context) (*dlock.Lease, error)
	}{
		{"mutex", c.Mutex("bench/k/mutex").Lock},
		{"read", c.RWMutex("bench/k/rw").RLock},
		{"write", c.RWMutex("bench/k/rw").Lock},
		{"permit", c.Semaphore("bench/k/sem", 4).Acquire},
	} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				l, err := k.lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
