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

func ExampleRWMutex() {
	ctx := context.Background()
	c, err := dlock.Open(ctx, "mem://rwmutex")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	rw := c.RWMutex("reports/2026-11")
	r1, _ := rw.RLock(ctx) // readers hold together
	r2, _ := rw.RLock(ctx)
	_, err = rw.TryLock(ctx) // a writer waits for them
	fmt.Println("write while read:", errors.Is(err, dlock.ErrNotAcquired))
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)

	w, _ := rw.Lock(ctx)
	fmt.Println("write token above the reads':", w.Token() > r2.Token())
	_ = w.Unlock(ctx)

	// Do runs under the read lock with RLocker.
	_ = dlock.Do(ctx, rw.RLocker(), func(ctx context.Context, l *dlock.Lease) error {
		_, err := rw.Lock(ctx) // a read-to-write upgrade would deadlock
		fmt.Println("upgrade refused:", errors.Is(err, dlock.ErrUpgrade))
		return nil
	})
	// Output:
	// write while read: true
	// write token above the reads': true
	// upgrade refused: true
}

func ExampleSemaphore() {
	ctx := context.Background()
	c, err := dlock.Open(ctx, "mem://semaphore")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sem := c.Semaphore("payments-api", 2) // at most 2 holders at once
	p1, _ := sem.Acquire(ctx)
	p2, _ := sem.Acquire(ctx)
	_, err = sem.TryAcquire(ctx)
	fmt.Println("third permit:", errors.Is(err, dlock.ErrNotAcquired))

	info, _ := sem.Inspect(ctx)
	fmt.Printf("%d of %d permits held\n", len(info.Holders), info.Limit)

	_, err = c.Semaphore("payments-api", 5).TryAcquire(ctx)
	fmt.Println("other count:", errors.Is(err, dlock.ErrLimitMismatch))

	_ = p1.Unlock(ctx)
	err = dlock.Do(ctx, sem.Locker(), func(ctx context.Context, l *dlock.Lease) error {
		fmt.Println("holding a permit with token", l.Token())
		return nil
	})
	fmt.Println(err)
	_ = p2.Unlock(ctx)
	// Output:
	// third permit: true
	// 2 of 2 permits held
	// other count: true
	// holding a permit with token 3
	// <nil>
}

func ExampleSemaphore_ForceUnlock() {
	ctx := context.Background()
	c, err := dlock.Open(ctx, "mem://force")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	stuck, _ := c.Semaphore("exports", 1, dlock.WithTTL(300*time.Millisecond)).Acquire(ctx)

	// An operator drops every permit (dlock unlock --force --kind sem).
	if err := c.Semaphore("exports", 1).ForceUnlock(ctx); err != nil {
		log.Fatal(err)
	}
	next, _ := c.Semaphore("exports", 1).TryAcquire(ctx)
	fmt.Println("next token above the dropped one:", next.Token() > stuck.Token())
	<-stuck.Done() // the holder finds out at its next renewal
	fmt.Println("holder lost its lease:", errors.Is(stuck.Err(), dlock.ErrLeaseLost))
	_ = next.Unlock(ctx)
	// Output:
	// next token above the dropped one: true
	// holder lost its lease: true
}
