package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// ListCaps says what a backend's List reports.
type ListCaps struct {
	Labels  bool // holder labels are kept (Info.Label)
	TTL     bool // time left is known (Info.TTL)
	Waiters bool // waiters queue in the store (Info.Waiters)
}

// testList checks Client.List (driver.Lister) against the store: it lists
// the held locks under a prefix, and only those, with their holder label,
// token, time left and waiters, names with characters that stores escape
// included. A backend that declares NoList must refuse with ErrUnsupported.
func (s *suite) testList(t *testing.T) {
	caps := s.caps.List
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	open := func() *dlock.Client { return s.client(t) }
	if s.caps.NoList != "" {
		_, err := open().List(ctx, "")
		if !errors.Is(err, dlock.ErrUnsupported) {
			t.Fatalf("List on a backend that declares it cannot list (%s): %v; want ErrUnsupported", s.caps.NoList, err)
		}
		t.Logf("declared: %s; List says: %v", s.caps.NoList, err)
		return
	}
	c := open()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	p := "ls-" + hex.EncodeToString(b) + "/"
	names := []string{p + "a", p + "b/c", p + "{x}%_*[y]"}
	leases := map[string]*dlock.Lease{}
	for _, n := range append(names, "other-"+hex.EncodeToString(b)+"/z", p+"free") {
		l, err := c.Mutex(n, dlock.WithTTL(10*time.Second), dlock.WithLabel("worker-1")).Lock(ctx)
		if err != nil {
			t.Fatalf("lock %q: %v", n, err)
		}
		leases[n] = l
	}
	if err := leases[p+"free"].Unlock(ctx); err != nil { // released: not listed
		t.Fatal(err)
	}
	check := func(want []string) []dlock.Info {
		t.Helper()
		got, err := c.List(ctx, p)
		if err != nil {
			t.Fatalf("List(%q): %v", p, err)
		}
		if len(got) != len(want) {
			t.Fatalf("List(%q) = %+v, want %q", p, got, want)
		}
		for i, info := range got {
			l := leases[want[i]]
			switch {
			case info.Name != want[i]:
				t.Errorf("List[%d] = %q, want %q (in name order)", i, info.Name, want[i])
			case !info.Held || info.Token != l.Token():
				t.Errorf("%q: held %v token %d, want held with token %d", info.Name, info.Held, info.Token, l.Token())
			case caps.Labels && info.Label != "worker-1":
				t.Errorf("%q: label %q, want worker-1", info.Name, info.Label)
			case caps.TTL && (info.TTL <= 0 || info.TTL > 10*time.Second):
				t.Errorf("%q: TTL %v, want in (0, 10s]", info.Name, info.TTL)
			}
		}
		return got
	}
	check(names)

	if caps.Waiters {
		c2 := open()
		wctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c2.Mutex(p + "a").Lock(wctx)
			done <- err
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if got := check(names); got[0].Waiters == 1 {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%q: waiters %d, want 1 while another client waits", got[0].Name, got[0].Waiters)
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		if err := <-done; !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("waiter: %v", err)
		}
	}

	if err := leases[p+"b/c"].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check([]string{p + "a", p + "{x}%_*[y]"})
	all, err := c.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, info := range all {
		seen[info.Name] = true
	}
	if !seen[p+"a"] || !seen["other-"+hex.EncodeToString(b)+"/z"] {
		t.Errorf("List(\"\") misses locks: %v", all)
	}
	listKinds(ctx, t, c, "lsk-"+hex.EncodeToString(b)+"/", caps)
}

// listKinds checks that List shows every kind the backend has under prefix
// q, each as what it is: an election's term (leader value and term), a
// Mutex, a read-write lock's readers, a semaphore's permits used of its
// count, a read-write lock's writer.
func listKinds(ctx context.Context, t *testing.T, c *dlock.Client, q string, caps ListCaps) {
	t.Helper()
	ttl := dlock.WithTTL(10 * time.Second)
	type want struct {
		name    string
		kind    dlock.Kind
		holders int
		check   func(dlock.Info) string
	}
	var wants []want
	term, err := c.Election(q+"el", ttl).Campaign(ctx, "leader-1")
	switch {
	case errors.Is(err, dlock.ErrUnsupported):
	case err != nil:
		t.Fatalf("campaign: %v", err)
	default:
		// Inspect of a portable election's name (a lock held by a
		// candidate's internal owner id) says it is an election, with the
		// leader's value and term, so that an operator about to
		// force-release it is shown the leader. (A store's own election
		// layout reads as a hold by the leader's value, or not at all.)
		if i, err := c.Inspect(ctx, q+"el"); err != nil {
			t.Fatalf("inspect the election: %v", err)
		} else if driver.IsElectionOwner(i.Owner) && (!i.Election || i.Token != term.Token() || caps.Labels && i.Label != "leader-1") {
			t.Errorf("Inspect of a portable election's name = %+v; want it marked as an election, with term %d and leader-1", i, term.Token())
		}
		wants = append(wants, want{q + "el", dlock.KindExclusive, 0, func(i dlock.Info) string {
			switch {
			case !i.Election:
				return "not marked as an election"
			case i.Token != term.Token():
				return fmt.Sprintf("term %d, want %d", i.Token, term.Token())
			case caps.Labels && i.Label != "leader-1":
				return fmt.Sprintf("leader value %q, want leader-1", i.Label)
			}
			return ""
		}})
	}
	mx, err := c.Mutex(q+"mx", ttl).Lock(ctx)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	wants = append(wants, want{q + "mx", dlock.KindExclusive, 0, func(i dlock.Info) string {
		if i.Election || i.Token != mx.Token() {
			return fmt.Sprintf("election %v token %d, want a Mutex hold with token %d", i.Election, i.Token, mx.Token())
		}
		return ""
	}})
	rw := func(n int) *dlock.RWMutex {
		return c.RWMutex(q+"rw", ttl, dlock.WithOwner(fmt.Sprintf("%sreader-%d", q, n)), dlock.WithLabel(fmt.Sprintf("reader-%d", n)))
	}
	if err := rw(0).Err(); !errors.Is(err, dlock.ErrUnsupported) {
		for n := range 2 {
			if _, err := rw(n).RLock(ctx); err != nil {
				t.Fatalf("rlock %d: %v", n, err)
			}
		}
		wants = append(wants, want{q + "rw", dlock.KindShared, 2, nil})
	}
	sem := func(n int) *dlock.Semaphore {
		return c.Semaphore(q+"sem", 3, ttl, dlock.WithOwner(fmt.Sprintf("%spermit-%d", q, n)))
	}
	if err := sem(0).Err(); !errors.Is(err, dlock.ErrUnsupported) {
		for n := range 2 {
			if _, err := sem(n).Acquire(ctx); err != nil {
				t.Fatalf("acquire %d: %v", n, err)
			}
		}
		wants = append(wants, want{q + "sem", dlock.KindPermit, 2, func(i dlock.Info) string {
			if i.Limit != 3 {
				return fmt.Sprintf("%d permits in all, want 3", i.Limit)
			}
			return ""
		}})
	}
	if w := c.RWMutex(q+"wr", ttl); !errors.Is(w.Err(), dlock.ErrUnsupported) {
		if _, err := w.Lock(ctx); err != nil {
			t.Fatalf("write lock: %v", err)
		}
		wants = append(wants, want{q + "wr", dlock.KindWrite, 1, nil})
	}
	got, err := c.List(ctx, q)
	if err != nil {
		t.Fatalf("List(%q): %v", q, err)
	}
	if len(got) != len(wants) {
		t.Fatalf("List(%q) = %+v, want %d locks: %+v", q, got, len(wants), wants)
	}
	for i, w := range wants {
		g := got[i]
		msg := ""
		switch {
		case g.Name != w.name || g.Kind != w.kind || !g.Held:
			msg = fmt.Sprintf("%q kind %v held %v, want %q kind %v held", g.Name, g.Kind, g.Held, w.name, w.kind)
		case w.holders > 0 && len(g.Holders) != w.holders:
			msg = fmt.Sprintf("%d holders, want %d", len(g.Holders), w.holders)
		case w.check != nil:
			msg = w.check(g)
		}
		if msg != "" {
			t.Errorf("List[%d] %q: %s", i, w.name, msg)
		}
	}
}
