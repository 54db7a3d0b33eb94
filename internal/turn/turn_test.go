package turn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestExcludesPerKey(t *testing.T) {
	var s Set[string]
	var inside [2]atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"a", "b"}[i%2]
			for range 50 {
				tn, err := s.Take(t.Context(), key, Wait)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside[i%2].Add(1); n != 1 {
					t.Errorf("%d callers hold %q at once", n, key)
				}
				inside[i%2].Add(-1)
				tn.Done()
			}
		}()
	}
	wg.Wait()
	if n := s.Len(); n != 0 {
		t.Fatalf("%d keys left in the set after every turn was given up", n)
	}
}

func TestArrivalOrder(t *testing.T) {
	var s Set[int]
	first, err := s.Take(t.Context(), 1, Wait)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tn, err := s.Take(t.Context(), 1, Wait)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			tn.Done()
		}()
		waitQueued(t, &s, 1, i+2) // the holder and i+1 waiters
	}
	first.Done()
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("turns came in order %v, want arrival order", order)
		}
	}
}

func TestTryModes(t *testing.T) {
	var s Set[string]
	held, err := s.Take(t.Context(), "k", Wait)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Take(t.Context(), "k", Try); !errors.Is(err, ErrBusy) {
		t.Fatalf("Try on a taken key: %v, want ErrBusy", err)
	}
	held.Block(true)
	if _, err := s.Take(t.Context(), "k", TryUnlessBlocked); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryUnlessBlocked on a blocked holder: %v, want ErrBusy", err)
	}
	held.Block(false)
	got := make(chan error, 1)
	go func() {
		tn, err := s.Take(t.Context(), "k", TryUnlessBlocked)
		if err == nil {
			tn.Done()
		}
		got <- err
	}()
	waitQueued(t, &s, "k", 2)
	held.Done()
	if err := <-got; err != nil {
		t.Fatalf("TryUnlessBlocked behind a holder that is not blocked: %v, want its turn", err)
	}
	tn, err := s.Take(t.Context(), "k", Try)
	if err != nil {
		t.Fatalf("Try on a free key: %v", err)
	}
	tn.Done()
	tn.Done() // twice does nothing
	if n := s.Len(); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// A waiter that gives up, because its ctx ends or (TakeUntil) its stop
// channel closes, leaves the line: the turn passes over it.
func TestCancelledWaiterLeavesLine(t *testing.T) {
	for _, by := range []struct {
		name string
		want error
	}{{"ctx", context.Canceled}, {"stop", ErrStopped}} {
		t.Run(by.name, func(t *testing.T) {
			var s Set[string]
			held, _ := s.Take(t.Context(), "k", Wait)
			ctx, cancel := context.WithCancel(t.Context())
			stop := make(chan struct{})
			got := make(chan error, 1)
			go func() {
				_, err := s.TakeUntil(ctx, "k", Wait, stop)
				got <- err
			}()
			waitQueued(t, &s, "k", 2)
			third := make(chan *Turn[string], 1)
			go func() {
				tn, err := s.Take(t.Context(), "k", Wait)
				if err != nil {
					t.Error(err)
				}
				third <- tn
			}()
			waitQueued(t, &s, "k", 3)
			if by.want == ErrStopped {
				close(stop)
			} else {
				cancel()
			}
			if err := <-got; !errors.Is(err, by.want) {
				t.Fatalf("waiter given up by %s: %v; want %v", by.name, err, by.want)
			}
			cancel()
			held.Done()
			select {
			case tn := <-third:
				tn.Done()
			case <-time.After(10 * time.Second):
				t.Fatal("the turn did not pass over the waiter that gave up")
			}
			if n := s.Len(); n != 0 {
				t.Fatalf("%d keys left", n)
			}
		})
	}
}

// waitQueued waits until key's line has n entries.
func waitQueued[K comparable](t *testing.T, s *Set[K], key K, n int) {
	t.Helper()
	for range 10000 {
		s.mu.Lock()
		l := s.lines[key]
		got := 0
		if l != nil {
			got = len(l.queue)
		}
		s.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("line of %v never reached %d", key, n)
}
