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

// TestLockUnlockAllocs holds the portable layer to its cost on the
// in-process backend: an uncontended Lock+Unlock makes at most 10
// allocations (6 at the time of writing: the owner id, the owner's turn,
// the hold, the lease (the API's, holding the engine's) and the mem
// store's own; a lease's context is made only when asked for).
func TestLockUnlockAllocs(t *testing.T) {
	c := memlock.Open()
	defer c.Close()
	ctx := t.Context()
	m := c.Mutex("allocs")
	n := testing.AllocsPerRun(200, func() {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if n > 10 {
		t.Errorf("Lock+Unlock on mem:// made %v allocations; want at most 10", n)
	}
	t.Logf("%v allocations per Lock+Unlock", n)
}
