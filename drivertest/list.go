package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
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
}
