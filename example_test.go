package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dlock/dlock"
	_ "github.com/dlock/dlock/memlock" // registers mem://
)

func Example() {
	ctx := context.Background()
	c, err := dlock.Open(ctx, "mem://example") // e.g. "redis://localhost:6379" in production
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	m := c.Mutex("orders/sku-42", dlock.WithTTL(10*time.Second))
	lease, err := m.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.WithoutCancel(ctx))
	fmt.Println("holding with fencing token", lease.Token())
	// Output: holding with fencing token 1
}

func ExampleMutex_TryLock() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://trylock")
	defer c.Close()

	held, _ := c.Mutex("cron/nightly-report").Lock(ctx)
	_, err := c.Mutex("cron/nightly-report").TryLock(ctx) // another owner
	if errors.Is(err, dlock.ErrNotAcquired) {
		fmt.Println("already running elsewhere; skipping")
	}
	_ = held.Unlock(ctx)
	// Output: already running elsewhere; skipping
}

func ExampleDo() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://do")
	defer c.Close()

	stock := 1
	err := dlock.Do(ctx, c.Mutex("stock/sku-42"), func(ctx context.Context, l *dlock.Lease) error {
		// ctx is cancelled if the lease is lost: stop writing then.
		if stock <= 0 {
			return errors.New("sold out")
		}
		stock--
		return nil
	})
	fmt.Println(err, stock)
	// Output: <nil> 0
}

func ExampleClient_Inspect() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://inspect")
	defer c.Close()

	m := c.Mutex("jobs/import", dlock.WithOwner("worker-7"))
	l1, _ := m.Lock(ctx)
	l2, _ := m.Lock(ctx) // re-entry by the same owner
	info, _ := c.Inspect(ctx, "jobs/import")
	fmt.Println(info.Held, info.Owner, info.Holds, info.Token)
	_ = l2.Unlock(ctx)
	_ = l1.Unlock(ctx)
	info, _ = c.Inspect(ctx, "jobs/import")
	fmt.Println(info.Held)
	// Output:
	// true worker-7 2 1
	// false
}

func ExampleLease_Done() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://done")
	defer c.Close()

	l, _ := c.Mutex("short", dlock.WithTTL(50*time.Millisecond), dlock.WithoutRenewal()).Lock(ctx)
	select {
	case <-l.Done():
		fmt.Println("lost:", errors.Is(l.Err(), dlock.ErrLeaseLost))
	case <-time.After(time.Second):
		fmt.Println("still held")
	}
	// Output: lost: true
}

func ExampleTryOnce() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://tryonce")
	defer c.Close()

	report := c.Mutex("cron/nightly-report")
	other, _ := report.Lock(ctx) // another run is busy
	err := dlock.Do(ctx, report, func(context.Context, *dlock.Lease) error {
		fmt.Println("writing the report")
		return nil
	}, dlock.TryOnce())
	fmt.Println("skipped:", errors.Is(err, dlock.ErrNotAcquired))
	_ = other.Unlock(ctx)
	// Output: skipped: true
}

func ExampleMaxWait() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://maxwait")
	defer c.Close()

	m := c.Mutex("orders/sku-42")
	// Wait at most 5 s for the lock, then run as long as the work needs:
	// fn's ctx is the caller's, cancelled only if the lease is lost.
	err := dlock.Do(ctx, m, func(ctx context.Context, l *dlock.Lease) error {
		// A nested Do of the same lock re-enters: its ctx carries the lease.
		return dlock.Do(ctx, m, func(context.Context, *dlock.Lease) error {
			fmt.Println("inside, re-entered")
			return nil
		})
	}, dlock.MaxWait(5*time.Second))
	fmt.Println(err)
	// Output:
	// inside, re-entered
	// <nil>
}
