package drivertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// Locker is one contender of a benchmark: dlock's or a peer library's lock
// and unlock.
type Locker struct {
	Lock   func(ctx context.Context) error
	Unlock func(ctx context.Context) error
}

// MutexLocker makes a Locker of c's Mutex for name.
func MutexLocker(c *dlock.Client, name string, opts ...dlock.Option) Locker {
	m := c.Mutex(name, opts...)
	var l *dlock.Lease
	return Locker{
		Lock:   func(ctx context.Context) (err error) { l, err = m.Lock(ctx); return err },
		Unlock: func(ctx context.Context) error { return l.Unlock(ctx) },
	}
}

// Contend runs the contenders on one lock for d, each holding it 1 ms per
// acquisition, and reports acquisitions/s, handoff latency p50 and p99 (one
// holder's unlock to the next holder's Lock returning) and fairness (max/min
// acquisitions per contender) as benchmark metrics.
func Contend(b *testing.B, ls []Locker, d time.Duration) {
	ctx := b.Context()
	var (
		mu       sync.Mutex
		released time.Time // when the last holder unlocked
		handoffs []time.Duration
		counts   = make([]int, len(ls))
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := l.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				got := time.Now()
				mu.Lock()
				if !released.IsZero() {
					handoffs = append(handoffs, got.Sub(released))
				}
				counts[i]++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				released = time.Now()
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	slices.Sort(handoffs)
	total := 0
	for _, n := range counts {
		total += n
	}
	b.ReportMetric(float64(total)/wall.Seconds(), "acq/s")
	if len(handoffs) > 0 {
		b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds())/1000, "p50-handoff-ms")
		b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds())/1000, "p99-handoff-ms")
	}
	b.ReportMetric(float64(slices.Max(counts))/float64(max(slices.Min(counts), 1)), "max/min")
}

// LockUnlock is an uncontended benchmark loop: Lock and Unlock of name on
// c, b.N times.
func LockUnlock(b *testing.B, c *dlock.Client, name string) {
	Uncontended(b, MutexLocker(c, name))
}

// Uncontended is an uncontended benchmark loop: Lock and Unlock of l, b.N
// times.
func Uncontended(b *testing.B, l Locker) {
	ctx := b.Context()
	for b.Loop() {
		if err := l.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// ContendClients is Contend with n contenders, each a client of its own
// from newClient, on a fresh name, for each of b's iterations.
func ContendClients(b *testing.B, newClient func(context.Context) (*dlock.Client, error), n int, d time.Duration) {
	for b.Loop() {
		name := fmt.Sprintf("bench/c/%d", time.Now().UnixNano())
		ls := make([]Locker, n)
		for i := range ls {
			c, err := newClient(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ls[i] = MutexLocker(c, name)
		}
		Contend(b, ls, d)
	}
}
