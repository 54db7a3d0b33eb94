package natslock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go/jetstream"
)

func benchURL(b *testing.B) string {
	return "nats://" + testserver.NATSProcess(b).Addr()
}

func dlockLockers(b *testing.B, url string, n int, name string) []drivertest.Locker {
	ls := make([]drivertest.Locker, n)
	for i := range ls {
		nc, err := connect(url)
		if err != nil {
			b.Fatal(err)
		}
		c, err := natslock.Open(b.Context(), nc, natslock.Options{Bucket: "bench", CloseConn: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		ls[i] = drivertest.MutexLocker(c, name)
	}
	return ls
}

// BenchmarkUncontended: one contender, lock+unlock, beside the limit: a
// plain KV create (with a TTL) and purge through the same kind of client.
func BenchmarkUncontended(b *testing.B) {
	url := benchURL(b)
	b.Run("dlock", func(b *testing.B) {
		drivertest.Uncontended(b, dlockLockers(b, url, 1, "bench/u")[0])
	})
	b.Run("kv-create-purge", func(b *testing.B) {
		ctx := b.Context()
		nc, err := connect(url)
		if err != nil {
			b.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "benchraw", History: 1, LimitMarkerTTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rev, err := kv.Create(ctx, "k", []byte("v"), jetstream.KeyTTL(30*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			if err := kv.Purge(ctx, "k", jetstream.LastRevision(rev), jetstream.PurgeTTL(time.Minute)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkContended: 16 contenders (each its own client) on one name,
// each holding the lock 1 ms, for 3 s: acquisitions/s, handoff latency and
// fairness (max/min acquisitions per contender).
func BenchmarkContended(b *testing.B) {
	url := benchURL(b)
	for b.Loop() {
		name := fmt.Sprintf("bench/c/%d", time.Now().UnixNano())
		drivertest.Contend(b, dlockLockers(b, url, 16, name), 3*time.Second)
	}
}
