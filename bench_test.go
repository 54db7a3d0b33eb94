package dlock_test

import (
	"fmt"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/memlock"
)

// BenchmarkLockUnlock measures the portable layer's own cost on the
// in-process backend: Lock+Unlock of distinct names, in parallel.
func BenchmarkLockUnlock(b *testing.B) {
	c := memlock.Open()
	defer c.Close()
	ctx := b.Context()
	b.SetParallelism(8) // 16 goroutines on 2 cores
	var id int64
	b.RunParallel(func(pb *testing.PB) {
		id++
		m := c.Mutex(fmt.Sprintf("bench/%d", id))
		for pb.Next() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkManyLeases reports heap per held, renewed lease.
func BenchmarkManyLeases(b *testing.B) {
	for b.Loop() {
		c := memlock.Open()
		ls := make([]*dlock.Lease, 10000)
		for i := range ls {
			ls[i], _ = c.Mutex(fmt.Sprint(i)).Lock(b.Context())
		}
		_ = c.Close()
	}
}
