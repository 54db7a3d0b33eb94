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

func ExampleElection() {
	ctx := context.Background()
	c, err := dlock.Open(ctx, "mem://election") // e.g. "etcd://localhost:2379" in production
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	e := c.Election("billing/scheduler", dlock.WithTTL(10*time.Second))
	if _, err := e.Leader(ctx); errors.Is(err, dlock.ErrNoLeader) {
		fmt.Println("no leader yet")
	}
	term, err := e.Campaign(ctx, "host-a:8080") // blocks until this candidate leads
	if err != nil {
		log.Fatal(err)
	}
	l, _ := e.Leader(ctx)
	fmt.Println("leader:", l.Value, "term:", l.Term, "ours:", l.Term == term.Token())

	// Another candidate waits until the leader resigns (or dies: its term
	// ends with its lease).
	next := make(chan *dlock.Term)
	go func() {
		t, _ := c.Election("billing/scheduler").Campaign(ctx, "host-b:8080")
		next <- t
	}()
	_ = term.Resign(ctx)
	t2 := <-next
	fmt.Println("new leader:", t2.Value(), "later term:", t2.Token() > term.Token())
	_ = t2.Resign(ctx)
	// Output:
	// no leader yet
	// leader: host-a:8080 term: 1 ours: true
	// new leader: host-b:8080 later term: true
}

func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c, _ := dlock.Open(ctx, "mem://observe")
	defer c.Close()
	e := c.Election("billing/scheduler")

	seen := make(chan dlock.Leader)
	go func() {
		for l, err := range e.Observe(ctx) { // every change of leader, in term order
			if err == nil {
				seen <- l
			}
		}
	}()
	for _, v := range []string{"host-a", "host-b"} {
		t, _ := e.Campaign(ctx, v)
		l := <-seen
		fmt.Println("observed", l.Value, "in term", l.Term)
		_ = t.Resign(ctx)
	}
	// Output:
	// observed host-a in term 1
	// observed host-b in term 2
}

func ExampleElection_Lead() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://lead")
	defer c.Close()

	err := c.Election("cron/reports").Lead(ctx, "host-a", func(ctx context.Context, t *dlock.Term) error {
		// Runs only while leading: ctx is cancelled if the term is lost.
		fmt.Println("leading in term", t.Token())
		return nil
	})
	fmt.Println(err)
	// Output:
	// leading in term 1
	// <nil>
}

func ExampleLockAll() {
	ctx := context.Background()
	c, _ := dlock.Open(ctx, "mem://lockall")
	defer c.Close()

	// An order spanning two stock segments locks both, or neither. Locks are
	// taken in one global order, so concurrent orders cannot deadlock.
	g, err := dlock.LockAll(ctx, c.Mutex("stock/segment-7"), c.Mutex("stock/segment-2"))
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range g.Leases() { // in the order given
		fmt.Println(l.Name(), "token", l.Token())
	}
	_, err = dlock.TryLockAll(ctx, c.Mutex("stock/segment-2"), c.Mutex("stock/segment-9"))
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	_ = g.Unlock(ctx)
	info, _ := c.Inspect(ctx, "stock/segment-9")
	fmt.Println("segment-9 held after the failed try:", info.Held)
	// Output:
	// stock/segment-7 token 1
	// stock/segment-2 token 1
	// true
	// segment-9 held after the failed try: false
}
