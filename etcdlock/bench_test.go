package etcdlock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// locker is one contender's lock and unlock, for either library.
type locker struct {
	lock   func(ctx context.Context) error
	unlock func(ctx context.Context) error
}

func benchEndpoints(b *testing.B) []string {
	m, err := embedetcd.Start(embedetcd.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	return []string{m.ClientURL}
}

func dlockLockers(b *testing.B, eps []string, n int, name string) []locker {
	ls := make([]locker, n)
	for i := range ls {
		cli, err := newClientv3(eps, nil)
		if err != nil {
			b.Fatal(err)
		}
		c, err := etcdlock.Open(b.Context(), cli, etcdlock.Options{CloseClient: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		m := c.Mutex(name)
		var l *dlock.Lease
		ls[i] = locker{
			lock:   func(ctx context.Context) (err error) { l, err = m.Lock(ctx); return err },
			unlock: func(ctx context.Context) error { return l.Unlock(ctx) },
		}
	}
	return ls
}

func concurrencyLockers(b *testing.B, eps []string, n int, name string) []locker {
	ls := make([]locker, n)
	for i := range ls {
		cli, err := newClientv3(eps, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		m := concurrency.NewMutex(s, name+"/")
		ls[i] = locker{lock: m.Lock, unlock: m.Unlock}
	}
	return ls
}

// BenchmarkUncontended: one contender, lock+unlock.
func BenchmarkUncontended(b *testing.B) {
	eps := benchEndpoints(b)
	for _, lib := range []string{"dlock", "concurrency"} {
		b.Run(lib, func(b *testing.B) {
			var l locker
			if lib == "dlock" {
				l = dlockLockers(b, eps, 1, "bench/u/"+lib)[0]
			} else {
				l = concurrencyLockers(b, eps, 1, "bench/u/"+lib)[0]
			}
			ctx := b.Context()
			for b.Loop() {
				if err := l.lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkContended: 16 contenders (each its own client or session) on
// one name, each holding the lock 1 ms, for 3 s. Reports acquisitions/s,
// handoff latency (one holder's unlock to the next holder's Lock return)
// and fairness (max/min acquisitions per contender).
func BenchmarkContended(b *testing.B) {
	eps := benchEndpoints(b)
	for _, lib := range []string{"dlock", "concurrency"} {
		b.Run(lib, func(b *testing.B) {
			for b.Loop() {
				name := fmt.Sprintf("bench/c/%s/%d", lib, time.Now().UnixNano())
				var ls []locker
				if lib == "dlock" {
					ls = dlockLockers(b, eps, 16, name)
				} else {
					ls = concurrencyLockers(b, eps, 16, name)
				}
				contend(b, ls, 3*time.Second)
			}
		})
	}
}

func contend(b *testing.B, ls []locker, d time.Duration) {
	ctx := b.Context()
	var (
		mu       sync.Mutex
		released time.Time // when the last holder unlocked
		handoffs []time.Duration
		counts   = make([]int, len(ls))
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := l.lock(ctx); err != nil {
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
				if err := l.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(handoffs)
	total := 0
	lo, hi := counts[0], counts[0]
	for _, n := range counts {
		total += n
		lo, hi = min(lo, n), max(hi, n)
	}
	b.ReportMetric(float64(total)/d.Seconds(), "acq/s")
	if len(handoffs) > 0 {
		b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds())/1000, "p50-handoff-ms")
		b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds())/1000, "p99-handoff-ms")
	}
	b.ReportMetric(float64(hi)/float64(max(lo, 1)), "max/min")
}

var _ = clientv3.WithPrefix
