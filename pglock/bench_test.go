package pglock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/pglock"
)

// BenchmarkTableUncontended compares table mode's Lock+Unlock with running
// its two statements (acquire, release) bare through pgx.
func BenchmarkTableUncontended(b *testing.B) {
	srv := testserver.Postgres(b)
	h := &harness{url: testserver.PostgresURL(srv), mode: pglock.ModeTable}
	b.Run("dlock", func(b *testing.B) {
		drivertest.LockUnlock(b, drivertest.Client(b, h), "bench/u/dlock")
	})
	b.Run("statements", func(b *testing.B) {
		p, err := pool(b.Context(), h.url, nil, time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		ctx, owner, ttl := b.Context(), dlock.NewOwnerID(), (30 * time.Second).Milliseconds()
		for b.Loop() {
			var token, holds, left, deleted int64
			if err := p.QueryRow(ctx, pglock.AcquireSQL, "bench/u/statements", owner, ttl, "").Scan(&token, &holds, &left); err != nil {
				b.Fatal(err)
			}
			if holds == 0 {
				b.Fatal("not granted")
			}
			var seen bool
			if err := p.QueryRow(ctx, pglock.ReleaseSQL, "bench/u/statements", owner, token, []string{"0123456789abcdef"}, []int{1}, 0, 32).Scan(&deleted, &left, &seen); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkContended: 16 contenders, each its own client, on one name in
// each mode, holding it 1 ms, for 3 s.
func BenchmarkContended(b *testing.B) {
	srv := testserver.Postgres(b)
	for _, mode := range []pglock.Mode{pglock.ModeTable, pglock.ModeRow, pglock.ModeSession} {
		b.Run(string(mode), func(b *testing.B) {
			h := &harness{url: testserver.PostgresURL(srv), mode: mode}
			drivertest.ContendClients(b, h.NewClient, 16, 3*time.Second)
		})
	}
}

// BenchmarkRWTableRoundTrips: an uncontended RLock+Unlock in table mode
// through a proxy that delays each way by 1 ms, so that ns/op counts the
// round trips (about 2 ms each): an acquire decides in one transaction of
// three round trips, a release takes one.
func BenchmarkRWTableRoundTrips(b *testing.B) {
	srv := testserver.Postgres(b)
	px := testserver.NewProxy(b, srv.Addr())
	c, err := dlock.Open(b.Context(), "postgres://postgres@"+px.Addr()+"/postgres?sslmode=disable&mode=table")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	rw := c.RWMutex("bench/rw/roundtrips")
	l, err := rw.RLock(b.Context()) // the tables, and pgx's statement cache
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(b.Context()); err != nil {
		b.Fatal(err)
	}
	px.SetDelay(time.Millisecond)
	defer px.SetDelay(0)
	for b.Loop() {
		l, err := rw.RLock(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
