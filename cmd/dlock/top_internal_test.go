package main

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// TestTopState checks the rates and waits top derives from samples.
func TestTopState(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newTopState("redis")
	s.update([]dlock.Info{{Name: "a", Token: 10, Waiters: 4}, {Name: "b", Token: 3}}, t0)
	// a: 5 acquisitions in 2s, 4 waiters: 2.5/s, so a waiter waits 1.6s.
	// b: freed, then taken again twice (token 3 -> 5) while unsampled.
	rows := s.update([]dlock.Info{{Name: "a", Token: 15, Waiters: 4}, {Name: "b", Token: 5}}, t0.Add(2*time.Second))
	if rows[0].info.Name != "a" || rows[0].rate != 2.5 || rows[0].wait != 1600*time.Millisecond || rows[0].waitMin {
		t.Errorf("a: %+v", rows[0])
	}
	if rows[1].rate != 1 {
		t.Errorf("b: rate %v, want 1/s", rows[1].rate)
	}
	// Over the window: 5 acquisitions in 5s.
	rows = s.update([]dlock.Info{{Name: "a", Token: 15, Waiters: 4}}, t0.Add(5*time.Second))
	if rows[0].rate != 1 || rows[0].wait != 4*time.Second || rows[0].waitMin {
		t.Errorf("a at 5s: %+v", rows[0])
	}
	// Past the 10s window the old acquisitions no longer count: the wait is
	// a lower bound, from the last sample that saw an acquisition.
	rows = s.update([]dlock.Info{{Name: "a", Token: 15, Waiters: 4}}, t0.Add(16*time.Second))
	if rows[0].rate != 0 || rows[0].wait != 14*time.Second {
		t.Errorf("a after the window: %+v", rows[0])
	}

	// etcd tokens are revisions: a change of holder counts once.
	e := newTopState("etcd")
	e.update([]dlock.Info{{Name: "x", Token: 100}}, t0)
	rows = e.update([]dlock.Info{{Name: "x", Token: 250}}, t0.Add(time.Second))
	if rows[0].rate != 1 {
		t.Errorf("etcd rate %v, want 1/s", rows[0].rate)
	}
}

// TestTopTextFormats: one precision for every LEFT, and no ">-" in WAIT on
// the first sample (waiters seen, no time yet).
func TestTopTextFormats(t *testing.T) {
	for d, want := range map[time.Duration]string{24 * time.Second: "24.0s", 8080 * time.Millisecond: "8.1s", 0: "-", 90 * time.Second: "1m30s"} {
		if got := left(d); got != want {
			t.Errorf("left(%v) = %q, want %q", d, got, want)
		}
	}
	st := newTopState("redis")
	rows := st.update([]dlock.Info{{Name: "a", Held: true, Token: 1, Waiters: 2}}, time.Now())
	var b strings.Builder
	renderTop(&b, "redis", "", time.Second, time.Now(), rows, nil)
	if strings.Contains(b.String(), ">-") {
		t.Errorf("first sample shows >-:\n%s", b.String())
	}
}
