package etcdlock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/embedetcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func benchEndpoints(b *testing.B) []string {
	m, err := embedetcd.Start(embedetcd.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(m.Close)
	return []string{m.ClientURL}
}

func dlockLockers(b *testing.B, eps []string, n int, name string) []drivertest.Locker {
	ls := make([]drivertest.Locker, n)
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
		ls[i] = drivertest.MutexLocker(c, name)
	}
	return ls
}

func concurrencyLockers(b *testing.B, eps []string, n int, name string) []drivertest.Locker {
	ls := make([]drivertest.Locker, n)
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
		ls[i] = drivertest.Locker{Lock: m.Lock, Unlock: m.Unlock}
	}
	return ls
}

// BenchmarkUncontended: one contender, lock+unlock.
func BenchmarkUncontended(b *testing.B) {
	eps := benchEndpoints(b)
	for _, lib := range []string{"dlock", "concurrency"} {
		b.Run(lib, func(b *testing.B) {
			var l drivertest.Locker
			if lib == "dlock" {
				l = dlockLockers(b, eps, 1, "bench/u/"+lib)[0]
			} else {
				l = concurrencyLockers(b, eps, 1, "bench/u/"+lib)[0]
			}
			drivertest.Uncontended(b, l)
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
				var ls []drivertest.Locker
				if lib == "dlock" {
					ls = dlockLockers(b, eps, 16, name)
				} else {
					ls = concurrencyLockers(b, eps, 16, name)
				}
				drivertest.Contend(b, ls, 3*time.Second)
			}
		})
	}
}

var _ = clientv3.WithPrefix
