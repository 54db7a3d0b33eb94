package natslock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// A hold's token, as Inspect reports it (and so an election's term, as
// Leader and Observe report it), stays the holder's own when a waiter
// queues behind it. A create cannot store its token (the create's
// revision, unknown when it is written), and the waiter's rewrite of the
// holder's key that sets W used to keep it unstored, so readers took the
// key's new revision for the token until the holder's first renewal.
func TestTokenStableWhenWaiterQueues(t *testing.T) {
	u := testserver.NATSInProcess(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, b := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)
	l, err := a.Mutex("tok", dlock.WithTTL(30*time.Second)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go func() {
		if l2, err := b.Mutex("tok").Lock(wctx); err == nil {
			_ = l2.Unlock(ctx)
		}
	}()
	if info := waitQueued(t, ctx, b, "tok"); info.Token != l.Token() {
		t.Errorf("Inspect with a waiter queued: token %d; the holder's token is %d", info.Token, l.Token())
	}
	if ld, err := b.Election("tok").Leader(ctx); err != nil || ld.Term != l.Token() {
		t.Errorf("Leader: %+v, %v; want term %d", ld, err, l.Token())
	}
	if infos, err := b.List(ctx, "tok"); err != nil || len(infos) != 1 || infos[0].Token != l.Token() {
		t.Errorf("List: %+v, %v; want token %d", infos, err, l.Token())
	}
	wcancel()
	_ = l.Unlock(ctx)
}

// Observe reports a leader's term once, even when another candidate
// queues behind it (a rewrite of the leader's key): the promise that no
// term is reported twice.
func TestObserveReportsTermOnceWithCandidateQueued(t *testing.T) {
	u := testserver.NATSInProcess(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, b := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)
	ttl := dlock.WithTTL(30 * time.Second) // no renewal during the test
	term, err := a.Election("el", ttl).Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	type seen struct {
		value string
		term  uint64
	}
	leaders := make(chan seen, 16)
	go func() {
		defer close(leaders)
		for ld, err := range b.Election("el").Observe(octx) {
			if err == nil {
				leaders <- seen{ld.Value, ld.Term}
			}
		}
	}()
	if first := <-leaders; first != (seen{"v1", term.Token()}) {
		t.Fatalf("Observe first: %+v; want v1 at term %d", first, term.Token())
	}
	next := make(chan *dlock.Term, 1)
	go func() {
		tm, err := b.Election("el", ttl).Campaign(ctx, "v2")
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the second candidate: %v", err)
		}
		next <- tm
	}()
	waitQueued(t, ctx, a, "el") // the candidate
	// Lets Observe read the leader a few times (it polls every 200ms)
	// with the candidate queued; not a timing assertion.
	time.Sleep(time.Second)
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tm := <-next
	if tm == nil {
		t.Fatal("the second candidate did not win")
	}
	for s := range leaders {
		if s.value == "v2" {
			if s.term != tm.Token() {
				t.Errorf("Observe: v2 at term %d; its term is %d", s.term, tm.Token())
			}
			break
		}
		t.Errorf("Observe reported %+v again, before v2; want each term once", s)
	}
	ocancel()
	for range leaders {
	}
	_ = tm.Resign(ctx)
}
