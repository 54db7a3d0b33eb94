package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// testElection runs the leader election section (Client.Election), or, on
// a backend that declares NoElection, checks that it refuses.
func (s *suite) testElection(t *testing.T) {
	if s.caps.NoElection != "" {
		_, err := s.client(t).Election(lockName(t)).Campaign(t.Context(), "v")
		if !errors.Is(err, dlock.ErrUnsupported) {
			t.Fatalf("Campaign on a backend that declares no elections (%s): %v; want ErrUnsupported", s.caps.NoElection, err)
		}
		t.Logf("declared: %s; Campaign says: %v", s.caps.NoElection, err)
		return
	}
	s.runAll(t, []test{
		{"LeaderValue", s.testLeaderValue},
		{"OneLeaderTermsIncrease", s.testOneLeader},
		{"ObserveEveryLeaderOnce", s.testObserve},
		{"ResignHandsOver", s.testResign},
		{"DeadLeaderReplaced", s.testDeadLeader},
		{"Proclaim", s.testProclaim},
		{"LeadCancelsOnLoss", s.testLeadLoss},
		{"CampaignCancelled", s.testCampaignCancelled},
	})
}

// contentionTTL is the TTL of the contention tests, which test exclusion,
// not expiry: long enough that a loaded machine does not lose a lease
// (the backends' short test TTLs are 500ms).
const contentionTTL = 10 * time.Second

// campaign campaigns with a 20s bound (a liveness bound, not a speed one).
func campaign(t *testing.T, e *dlock.Election, value string) *dlock.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx, value)
	if err != nil {
		t.Fatalf("Campaign(%s, %q): %v", e.Name(), value, err)
	}
	return term
}

// wantValue is the value Leader reports for v: none where the portable
// election has no labels to keep it in.
func (s *suite) wantValue(v string) string {
	if s.caps.NoLabels {
		return ""
	}
	return v
}

// 1. Leader reports none, then the leader's value and term.
func (s *suite) testLeaderValue(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	if _, err := b.Election(name).Leader(t.Context()); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader of a new election: %v; want ErrNoLeader", err)
	}
	term := campaign(t, a.Election(name, dlock.WithTTL(s.caps.TTL)), "host-a:8080")
	l, err := b.Election(name).Leader(t.Context())
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if l.Term != term.Token() || l.Value != s.wantValue("host-a:8080") {
		t.Fatalf("Leader = %+v; want value %q, term %d", l, s.wantValue("host-a:8080"), term.Token())
	}
	if err := term.Resign(t.Context()); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if _, err := b.Election(name).Leader(t.Context()); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after Resign: %v; want ErrNoLeader", err)
	}
}

// 2. Under contention at most one candidate leads at any instant, and each
// new term is greater than the last.
func (s *suite) testOneLeader(t *testing.T) {
	name := lockName(t)
	const candidates, terms = 4, 12
	var (
		leading atomic.Int32
		mu      sync.Mutex
		tokens  []uint64
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for i := range candidates {
		c := s.client(t)
		wg.Go(func() {
			e := c.Election(name, dlock.WithTTL(contentionTTL))
			for ctx.Err() == nil {
				term, err := e.Campaign(ctx, fmt.Sprintf("candidate-%d", i))
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Campaign: %v", err)
					}
					return
				}
				if n := leading.Add(1); n != 1 {
					t.Errorf("%d candidates lead at once", n)
				}
				mu.Lock()
				tokens = append(tokens, term.Token())
				done := len(tokens) >= terms
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				if term.Err() != nil {
					t.Errorf("term lost while leading: %v", term.Err())
				}
				leading.Add(-1)
				if err := term.Resign(t.Context()); err != nil {
					t.Errorf("Resign: %v", err)
				}
				if done {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if len(tokens) < terms {
		t.Fatalf("only %d terms in 60s; want %d", len(tokens), terms)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term %d came after term %d: terms must strictly increase (%v)", tokens[i], tokens[i-1], tokens)
		}
	}
}

// 3. Observe reports every leader once, in term order, when each leads
// longer than the store's notification delay or poll interval.
func (s *suite) testObserve(t *testing.T) {
	name := lockName(t)
	obs := s.client(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		mu   sync.Mutex
		seen []dlock.Leader
		wg   sync.WaitGroup
	)
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		for l, err := range obs.Election(name).Observe(ctx) {
			if err != nil {
				t.Logf("Observe: %v", err)
				continue
			}
			mu.Lock()
			seen = append(seen, l)
			mu.Unlock()
		}
	})
	<-started
	var want []dlock.Leader
	cands := []*dlock.Client{s.client(t), s.client(t), s.client(t)}
	for i := range 6 {
		v := fmt.Sprintf("leader-%d", i)
		term := campaign(t, cands[i%len(cands)].Election(name, dlock.WithTTL(s.caps.TTL)), v)
		want = append(want, dlock.Leader{Value: s.wantValue(v), Term: term.Token()})
		// Lead long enough to be seen: the portable election polls every
		// 200ms; 600ms leaves room on a loaded machine.
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			ok := len(seen) > 0 && seen[len(seen)-1].Term == term.Token()
			mu.Unlock()
			if ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // a repeat of this term would show up by now
		if err := term.Resign(t.Context()); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	got := make([]dlock.Leader, len(seen))
	for i, l := range seen {
		got[i] = dlock.Leader{Value: l.Value, Term: l.Term}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Observe saw %v; want every leader once, in order: %v", got, want)
	}
}

// 4. Resign hands the lead to a waiting candidate, with a greater term.
func (s *suite) testResign(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	ta := campaign(t, a.Election(name, dlock.WithTTL(s.caps.TTL)), "a")
	got := make(chan *dlock.Term, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		tb, err := b.Election(name, dlock.WithTTL(s.caps.TTL)).Campaign(ctx, "b")
		if err != nil {
			t.Errorf("Campaign(b): %v", err)
		}
		got <- tb
	}()
	select {
	case tb := <-got:
		_ = tb.Resign(t.Context())
		t.Fatalf("b leads while a does")
	case <-time.After(300 * time.Millisecond):
	}
	resigned := time.Now()
	if err := ta.Resign(t.Context()); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if ta.Err() != nil {
		t.Fatalf("Err after Resign: %v; want nil", ta.Err())
	}
	tb := <-got
	if tb == nil {
		return
	}
	t.Logf("handed over %v after Resign was called", time.Since(resigned))
	defer tb.Resign(t.Context())
	if tb.Token() <= ta.Token() {
		t.Fatalf("b's term %d is not above a's %d", tb.Token(), ta.Token())
	}
	l, err := a.Election(name).Leader(t.Context())
	if err != nil || l.Term != tb.Token() || l.Value != s.wantValue("b") {
		t.Fatalf("Leader = %+v, %v; want b in term %d", l, err, tb.Token())
	}
}

// 5. A leader that dies without resigning (its connections cut) is
// replaced within TTL + 1s (plus the backend's slack), and its term ends.
func (s *suite) testDeadLeader(t *testing.T) {
	name := lockName(t)
	dead, b := s.client(t), s.client(t)
	td := campaign(t, dead.Election(name, dlock.WithTTL(s.caps.TTL)), "dead")
	if err := s.h.Cut(t.Context(), dead); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	cut := time.Now()
	bound := s.caps.TTL + time.Second + s.caps.Slack
	ctx, cancel := context.WithTimeout(t.Context(), bound)
	defer cancel()
	tb, err := b.Election(name, dlock.WithTTL(s.caps.TTL)).Campaign(ctx, "b")
	if err != nil {
		t.Fatalf("no new leader within TTL+1s+slack (%v) of the leader's death: %v", bound, err)
	}
	took := time.Since(cut)
	defer tb.Resign(t.Context())
	select {
	case <-td.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the dead leader's term is still live after a new leader was elected")
	}
	if !errors.Is(td.Err(), dlock.ErrLeaseLost) {
		t.Fatalf("dead leader's Err = %v; want ErrLeaseLost", td.Err())
	}
	if tb.Token() <= td.Token() {
		t.Fatalf("new term %d is not above the dead leader's %d", tb.Token(), td.Token())
	}
	t.Logf("new leader %v after the cut (TTL %v)", took, s.caps.TTL)
}

// 6. Proclaim changes the value under the same term, where supported.
func (s *suite) testProclaim(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	term := campaign(t, a.Election(name, dlock.WithTTL(s.caps.TTL)), "v1")
	defer term.Resign(t.Context())
	err := term.Proclaim(t.Context(), "v2")
	if errors.Is(err, dlock.ErrUnsupported) {
		t.Skipf("portable election: %v", err)
	}
	if err != nil {
		t.Fatalf("Proclaim: %v", err)
	}
	l, err := b.Election(name).Leader(t.Context())
	if err != nil || l.Value != "v2" || l.Term != term.Token() || term.Value() != "v2" {
		t.Fatalf("Leader after Proclaim = %+v, %v; want v2 in term %d", l, err, term.Token())
	}
}

// 7. Lead's ctx is cancelled when the term is lost (removed behind its back).
func (s *suite) testLeadLoss(t *testing.T) {
	name := lockName(t)
	a := s.client(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := a.Election(name, dlock.WithTTL(s.caps.TTL)).Lead(ctx, "a", func(ctx context.Context, term *dlock.Term) error {
		if err := s.remove(ctx, name); err != nil {
			return fmt.Errorf("remove: %w", err)
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if !errors.Is(err, dlock.ErrLeaseLost) {
		t.Fatalf("Lead after the term was removed: %v; want ErrLeaseLost", err)
	}
}
