package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
)

// The conformance tests of read-write locks and semaphores (issue #17). They
// run when the backend has the kind (Caps.Kinds), and otherwise check that
// making one is refused with ErrUnsupported.

func (s *suite) testKinds(t *testing.T) {
	c := s.client(t)
	rwOK, semOK := s.hasKind(t, c, true), s.hasKind(t, c, false)
	tests := []struct {
		name string
		ok   bool
		fn   func(t *testing.T)
	}{
		{"FamiliesApart", rwOK && semOK, s.testFamiliesApart},
		{"RWReadersShare", rwOK, s.testReadersShare},
		{"RWWriterExcludes", rwOK, s.testWriterExcludes},
		{"RWWaitingWriterBlocksReaders", rwOK, s.testWaitingWriterBlocksReaders},
		{"RWWriterUnderReaderStream", rwOK, s.testWriterUnderReaderStream},
		{"RWTokens", rwOK, s.testRWTokens},
		{"RWReentry", rwOK, s.testRWReentry},
		{"RWDeadReaderFreed", rwOK, s.testDeadReaderFreed},
		{"RWInspect", rwOK, s.testRWInspect},
		{"SemaphoreCount", semOK, func(t *testing.T) { s.testSemaphoreCount(t, false) }},
		{"SemaphoreCountHolderCut", semOK, func(t *testing.T) { s.testSemaphoreCount(t, true) }},
		{"SemaphoreTokens", semOK, s.testSemaphoreTokens},
		{"SemaphoreDeadHolderFreed", semOK, s.testDeadPermitFreed},
		{"SemaphoreLimitMismatch", semOK, s.testLimitMismatch},
		{"SemaphoreInspect", semOK, s.testSemaphoreInspect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.ok {
				t.Skip("the backend has not this kind")
			}
			tc.fn(t)
		})
	}
}

// hasKind reports whether c's backend has read-write locks (rw) or
// semaphores; if not, it checks that every method says why.
func (s *suite) hasKind(t *testing.T, c *dlock.Client, rw bool) bool {
	t.Helper()
	name := lockName(t) + "/probe"
	var l *dlock.Lease
	var err error
	if rw {
		l, err = c.RWMutex(name).TryRLock(t.Context())
	} else {
		l, err = c.Semaphore(name, 1).TryAcquire(t.Context())
	}
	if err == nil {
		unlock(t, l)
		return true
	}
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("probe of kind (rw %v): %v; want a lease or ErrUnsupported", rw, err)
	}
	if rw {
		_, err = c.RWMutex(name).Lock(t.Context())
		_, ierr := c.InspectRWMutex(t.Context(), name)
		err = errors.Join(err, ierr)
	} else {
		_, err = c.Semaphore(name, 3).Acquire(t.Context())
		_, ierr := c.InspectSemaphore(t.Context(), name)
		err = errors.Join(err, ierr)
	}
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("kind (rw %v) unsupported by TryLock but: %v", rw, err)
	}
	t.Logf("kind (rw %v) unsupported: %v", rw, err)
	return false
}

func waitCtx(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 10*time.Second)
}

func mustRLock(t *testing.T, rw *dlock.RWMutex) *dlock.Lease {
	t.Helper()
	ctx, cancel := waitCtx(t)
	defer cancel()
	l, err := rw.RLock(ctx)
	if err != nil {
		t.Fatalf("RLock(%s): %v", rw.Name(), err)
	}
	return l
}

func mustWLock(t *testing.T, rw *dlock.RWMutex) *dlock.Lease {
	t.Helper()
	ctx, cancel := waitCtx(t)
	defer cancel()
	l, err := rw.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock(%s): %v", rw.Name(), err)
	}
	return l
}

func mustAcquire(t *testing.T, sem *dlock.Semaphore) *dlock.Lease {
	t.Helper()
	ctx, cancel := waitCtx(t)
	defer cancel()
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", sem.Name(), err)
	}
	return l
}

func wantRefused(t *testing.T, what string, l *dlock.Lease, err error) {
	t.Helper()
	if err == nil {
		_ = l.Unlock(t.Context())
		t.Fatalf("%s succeeded; want ErrNotAcquired", what)
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("%s: %v; want ErrNotAcquired", what, err)
	}
}

// A Mutex, an RWMutex and a Semaphore of one name are three locks.
func (s *suite) testFamiliesApart(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	m := mustLock(t, a.Mutex(name))
	w := mustWLock(t, b.RWMutex(name))
	p := mustAcquire(t, a.Semaphore(name, 1))
	wantNotAcquired(t, b, name)
	l, err := a.RWMutex(name).TryRLock(t.Context())
	wantRefused(t, "TryRLock under a writer", l, err)
	l, err = b.Semaphore(name, 1).TryAcquire(t.Context())
	wantRefused(t, "TryAcquire of a held permit", l, err)
	for _, l := range []*dlock.Lease{m, w, p} {
		unlock(t, l)
	}
}

// Readers hold together: several inside at once, observed.
func (s *suite) testReadersShare(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const readers = 4
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	all := make(chan struct{})
	var once sync.Once
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := waitCtx(t)
			defer cancel()
			l, err := clients[r%2].RWMutex(name).RLock(ctx)
			if err != nil {
				t.Errorf("reader %d: RLock: %v", r, err)
				once.Do(func() { close(all) })
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			if n == readers {
				once.Do(func() { close(all) })
			}
			select { // stay inside until every reader is in
			case <-all:
			case <-ctx.Done():
			}
			inside.Add(-1)
			if err := l.Unlock(t.Context()); err != nil {
				t.Errorf("reader %d: Unlock: %v", r, err)
			}
		}()
	}
	wg.Wait()
	if most.Load() != readers {
		t.Fatalf("at most %d of %d readers inside at once; want all", most.Load(), readers)
	}
	w := mustWLock(t, clients[0].RWMutex(name)) // all released
	unlock(t, w)
}

// A writer excludes readers and writers: an overlap detector over readers
// and writers on two clients, a lost-update counter for the writers, and a
// write token above every grant seen before it.
func (s *suite) testWriterExcludes(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const workers = 8
	var (
		readers, writers atomic.Int32
		maxSeen          atomic.Uint64
		counter          int64 // only touched under the write lock
		writes, reads    atomic.Int64
		wg               sync.WaitGroup
	)
	see := func(tok uint64) {
		for m := maxSeen.Load(); tok > m && !maxSeen.CompareAndSwap(m, tok); m = maxSeen.Load() {
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := clients[w%2].RWMutex(name, dlock.WithTTL(5*time.Second))
			write := w%3 == 0
			for time.Now().Before(deadline) {
				ctx, cancel := waitCtx(t)
				var l *dlock.Lease
				var err error
				if write {
					l, err = rw.Lock(ctx)
				} else {
					l, err = rw.RLock(ctx)
				}
				cancel()
				if err != nil {
					t.Errorf("worker %d (write %v): %v", w, write, err)
					return
				}
				if write {
					if n := writers.Add(1); n != 1 || readers.Load() != 0 {
						t.Errorf("worker %d: writer inside with %d writers and %d readers", w, n, readers.Load())
					}
					if tok := l.Token(); tok <= maxSeen.Load() {
						t.Errorf("worker %d: write token %d not above an earlier grant's %d", w, tok, maxSeen.Load())
					}
					see(l.Token())
					v := counter
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
					counter = v + 1
					writes.Add(1)
					writers.Add(-1)
				} else {
					readers.Add(1)
					if n := writers.Load(); n != 0 {
						t.Errorf("worker %d: reader inside with %d writers", w, n)
					}
					see(l.Token())
					time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
					reads.Add(1)
					readers.Add(-1)
				}
				if err := l.Unlock(t.Context()); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if counter != writes.Load() {
		t.Fatalf("counter = %d after %d writes: lost updates", counter, writes.Load())
	}
	if writes.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("%d writes and %d reads in 2s; want some of each", writes.Load(), reads.Load())
	}
	t.Logf("%d writes, %d reads, tokens up to %d", writes.Load(), reads.Load(), maxSeen.Load())
}

// A waiting writer blocks readers that come after it, and gets the lock
// when the readers ahead of it leave.
func (s *suite) testWaitingWriterBlocksReaders(t *testing.T) {
	name := lockName(t)
	a, b, c := s.client(t), s.client(t), s.client(t)
	r := mustRLock(t, a.RWMutex(name))
	got := make(chan *dlock.Lease, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	go func() {
		l, err := b.RWMutex(name).Lock(ctx)
		if err != nil {
			t.Errorf("writer: Lock: %v", err)
		}
		got <- l
	}()
	// Once the writer waits, a new reader is refused.
	blocked := false
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		l, err := c.RWMutex(name).TryRLock(t.Context())
		if err == nil {
			unlock(t, l)
			continue
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryRLock: %v", err)
		}
		blocked = true
		break
	}
	if !blocked {
		t.Fatal("readers still admitted 10s after a writer began to wait: writers can starve")
	}
	if r.Err() != nil {
		t.Fatalf("the reader ahead lost its lease: %v", r.Err())
	}
	select {
	case l := <-got:
		if l != nil {
			unlock(t, l)
		}
		t.Fatal("the writer got the lock while a reader held it")
	default:
	}
	unlock(t, r)
	var w *dlock.Lease
	select {
	case w = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the writer did not get the lock within 15s of the last reader's Unlock")
	}
	if w == nil {
		return
	}
	if w.Token() <= r.Token() {
		t.Fatalf("write token %d not above the earlier read's %d", w.Token(), r.Token())
	}
	l, err := c.RWMutex(name).TryRLock(t.Context())
	wantRefused(t, "TryRLock under the writer", l, err)
	unlock(t, w)
	unlock(t, mustRLock(t, c.RWMutex(name)))
}

// A writer gets in within a bound under a continuous stream of overlapping
// readers on two clients, which without writer preference would hold the
// lock for ever.
func (s *suite) testWriterUnderReaderStream(t *testing.T) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const readers = 6
	hold := 200 * time.Millisecond
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(r) * hold / readers) // staggered, so the holds overlap
			rw := clients[r%2].RWMutex(name, dlock.WithTTL(5*time.Second))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				l, err := rw.RLock(ctx)
				cancel()
				if err != nil {
					t.Errorf("reader %d: RLock: %v", r, err)
					return
				}
				reads.Add(1)
				select {
				case <-time.After(hold):
				case <-stop:
				}
				if err := l.Unlock(t.Context()); err != nil {
					t.Errorf("reader %d: Unlock: %v", r, err)
					return
				}
			}
		}()
	}
	defer wg.Wait()
	defer close(stop)
	time.Sleep(2 * hold) // the stream is going
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := clients[0].RWMutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("writer under a stream of readers: %v after %v (%d reads)", err, time.Since(start), reads.Load())
	}
	t.Logf("writer in after %v under a stream of %d readers", time.Since(start).Round(time.Millisecond), readers)
	unlock(t, w)
}

// Tokens: every grant takes a new token; a write token is above every
// earlier grant's, reads included.
func (s *suite) testRWTokens(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	var last uint64
	for i := range 4 {
		r1 := mustRLock(t, a.RWMutex(name))
		r2 := mustRLock(t, b.RWMutex(name))
		if r1.Token() <= last || r2.Token() <= r1.Token() {
			t.Fatalf("round %d: read tokens %d, %d after %d; want increasing", i, r1.Token(), r2.Token(), last)
		}
		unlock(t, r1)
		unlock(t, r2)
		w := mustWLock(t, []*dlock.Client{a, b}[i%2].RWMutex(name))
		if w.Token() <= r2.Token() {
			t.Fatalf("round %d: write token %d not above the reads' %d", i, w.Token(), r2.Token())
		}
		last = w.Token()
		unlock(t, w)
	}
}

// Re-entry: a nested read or write under a ctx carrying the same kind
// shares the hold; a read under a write hold is a lease on the write hold;
// a write under a read hold is refused (ErrUpgrade).
func (s *suite) testRWReentry(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	rw := a.RWMutex(name)
	err := dlock.Do(t.Context(), rw, func(ctx context.Context, w *dlock.Lease) error {
		r, err := rw.TryRLock(ctx)
		if err != nil {
			return fmt.Errorf("read under the write hold: %w", err)
		}
		if r.Token() != w.Token() || r.Owner() != w.Owner() {
			t.Errorf("read under write: token %d owner %s; want the write hold's %d %s", r.Token(), r.Owner(), w.Token(), w.Owner())
		}
		unlock(t, r)
		l, err := b.RWMutex(name).TryRLock(t.Context())
		wantRefused(t, "another reader while the writer's nested read ended", l, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = dlock.Do(t.Context(), rw.RLocker(), func(ctx context.Context, r *dlock.Lease) error {
		r2, err := rw.RLock(ctx)
		if err != nil {
			return fmt.Errorf("nested read: %w", err)
		}
		if r2.Token() != r.Token() {
			t.Errorf("nested read token %d; want %d", r2.Token(), r.Token())
		}
		unlock(t, r2)
		w, err := rw.TryLock(ctx)
		if !errors.Is(err, dlock.ErrUpgrade) {
			if err == nil {
				unlock(t, w)
			}
			t.Errorf("write under a read hold: %v; want ErrUpgrade", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	unlock(t, mustWLock(t, b.RWMutex(name)))
}

// Read holds of a dead holder are freed at their TTL (or session end).
func (s *suite) testDeadReaderFreed(t *testing.T) {
	name := lockName(t)
	b := s.client(t)
	a, err := s.h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	r := mustRLock(t, a.RWMutex(name, dlock.WithTTL(s.caps.TTL)))
	l, err := b.RWMutex(name).TryLock(t.Context())
	wantRefused(t, "TryLock under a reader", l, err)
	if err := s.h.Cut(t.Context(), a); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), s.caps.TTL+s.caps.Slack+15*time.Second)
	defer cancel()
	w, err := b.RWMutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the reader died: %v", err)
	}
	t.Logf("dead reader's hold freed after %v", time.Since(start).Round(time.Millisecond))
	if w.Token() <= r.Token() {
		t.Fatalf("write token %d not above the dead read's %d", w.Token(), r.Token())
	}
	unlock(t, w)
}

func (s *suite) testRWInspect(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	info, err := a.InspectRWMutex(t.Context(), name)
	if err != nil || info.Held || len(info.Holders) != 0 {
		t.Fatalf("InspectRWMutex of a free lock = %+v, %v", info, err)
	}
	r1 := mustRLock(t, a.RWMutex(name, dlock.WithLabel("reader-one")))
	r2 := mustRLock(t, b.RWMutex(name))
	info, err = b.InspectRWMutex(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || len(info.Holders) != 2 {
		t.Fatalf("Inspect with two readers = %+v; want 2 holders", info)
	}
	owners := map[string]dlock.Holder{}
	for _, h := range info.Holders {
		owners[h.Owner] = h
		if h.Kind != dlock.KindShared {
			t.Errorf("holder %+v; want kind shared", h)
		}
		if !s.caps.SessionBound && !s.caps.ConnBound && (h.TTL <= 0 || h.TTL > dlock.DefaultTTL) {
			t.Errorf("holder %+v: TTL not in (0, %v]", h, dlock.DefaultTTL)
		}
	}
	h1, ok1 := owners[r1.Owner()]
	h2, ok2 := owners[r2.Owner()]
	if !ok1 || !ok2 || h1.Token != r1.Token() || h2.Token != r2.Token() {
		t.Fatalf("holders %+v; want owners %s (token %d), %s (token %d)", info.Holders, r1.Owner(), r1.Token(), r2.Owner(), r2.Token())
	}
	if !s.caps.NoLabels && h1.Label != "reader-one" {
		t.Errorf("reader label %q; want reader-one", h1.Label)
	}
	unlock(t, r1)
	unlock(t, r2)
	w := mustWLock(t, a.RWMutex(name))
	info, err = b.InspectRWMutex(t.Context(), name)
	if err != nil || !info.Held || len(info.Holders) != 1 || info.Holders[0].Kind != dlock.KindWrite ||
		info.Owner != w.Owner() || info.Token != w.Token() || info.Kind != dlock.KindWrite {
		t.Fatalf("Inspect with a writer = %+v, %v; want the writer %s, token %d", info, err, w.Owner(), w.Token())
	}
	unlock(t, w)
	info, err = b.InspectRWMutex(t.Context(), name)
	if err != nil || info.Held || len(info.Holders) != 0 {
		t.Fatalf("Inspect after Unlock = %+v, %v; want free", info, err)
	}
}

// The semaphore's count is never exceeded under contention by 8 holders
// over 2 clients; with cut, a further holder's connections are cut while it
// holds a permit, and the count of live holders, it included until its lease
// ends (or, where the server frees it with the connection, until the cut),
// still never exceeds the limit.
func (s *suite) testSemaphoreCount(t *testing.T, cut bool) {
	name := lockName(t)
	clients := []*dlock.Client{s.client(t), s.client(t)}
	const workers, limit = 8, 3
	var (
		inside, most atomic.Int32
		done         atomic.Int64
		wg           sync.WaitGroup
	)
	victimLive := func() int32 { return 0 }
	if cut {
		v, err := s.h.NewClient(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		vl := mustAcquire(t, v.Semaphore(name, limit, dlock.WithTTL(s.caps.TTL)))
		var cutDone atomic.Bool
		victimLive = func() int32 {
			if s.caps.ConnBound && cutDone.Load() || vl.Err() != nil {
				return 0
			}
			return 1
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(300 * time.Millisecond)
			cutDone.Store(true) // before the cut: until then the store counts it anyway
			if err := s.h.Cut(t.Context(), v); err != nil {
				t.Errorf("Cut: %v", err)
			}
		}()
	}
	deadline := time.Now().Add(2 * time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := clients[w%2].Semaphore(name, limit, dlock.WithTTL(5*time.Second))
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
				l, err := sem.Acquire(ctx)
				cancel()
				if err != nil {
					t.Errorf("worker %d: Acquire: %v", w, err)
					return
				}
				n := inside.Add(1)
				if v := victimLive(); n+v > limit {
					t.Errorf("worker %d: %d holders inside (%d of them the cut one) of %d permits", w, n+v, v, limit)
				}
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
				inside.Add(-1)
				if err := l.Unlock(t.Context()); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	// (That permits are held together at all is SemaphoreTokens' to show,
	// deterministically: how many overlap here depends on timing.)
	t.Logf("%d holds, at most %d at once", done.Load(), most.Load())
}

// Each permit holder has a token of its own; tokens increase.
func (s *suite) testSemaphoreTokens(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	var last uint64
	for i := range 3 {
		p1 := mustAcquire(t, a.Semaphore(name, 2))
		p2 := mustAcquire(t, b.Semaphore(name, 2))
		if p1.Token() <= last || p2.Token() <= p1.Token() {
			t.Fatalf("round %d: permit tokens %d, %d after %d; want increasing", i, p1.Token(), p2.Token(), last)
		}
		last = p2.Token()
		unlock(t, p1)
		unlock(t, p2)
	}
}

// Permits of a dead holder are freed at their TTL (or session end).
func (s *suite) testDeadPermitFreed(t *testing.T) {
	name := lockName(t)
	b := s.client(t)
	a, err := s.h.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sem := a.Semaphore(name, 2, dlock.WithTTL(s.caps.TTL))
	mustAcquire(t, sem)
	mustAcquire(t, sem)
	l, err := b.Semaphore(name, 2).TryAcquire(t.Context())
	wantRefused(t, "TryAcquire with both permits held", l, err)
	if err := s.h.Cut(t.Context(), a); err != nil {
		t.Fatalf("Cut: %v", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), s.caps.TTL+s.caps.Slack+15*time.Second)
	defer cancel()
	var got []*dlock.Lease
	for range 2 {
		l, err := b.Semaphore(name, 2).Acquire(ctx)
		if err != nil {
			t.Fatalf("Acquire after the holder died: %v", err)
		}
		got = append(got, l)
	}
	t.Logf("dead holder's permits freed after %v", time.Since(start).Round(time.Millisecond))
	for _, l := range got {
		unlock(t, l)
	}
}

// A semaphore opened with another permit count than its live holders' is
// refused with ErrLimitMismatch, at once and also by a blocking Acquire;
// with no live holders the new count replaces the old.
func (s *suite) testLimitMismatch(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	p := mustAcquire(t, a.Semaphore(name, 2))
	if l, err := b.Semaphore(name, 3).TryAcquire(t.Context()); !errors.Is(err, dlock.ErrLimitMismatch) {
		if err == nil {
			unlock(t, l)
		}
		t.Fatalf("TryAcquire with 3 permits while held with 2: %v; want ErrLimitMismatch", err)
	}
	ctx, cancel := waitCtx(t)
	defer cancel()
	if l, err := b.Semaphore(name, 3).Acquire(ctx); !errors.Is(err, dlock.ErrLimitMismatch) || ctx.Err() != nil {
		if err == nil {
			unlock(t, l)
		}
		t.Fatalf("Acquire with 3 permits while held with 2: %v (ctx %v); want ErrLimitMismatch before ctx ends", err, ctx.Err())
	}
	unlock(t, p)
	sem3 := b.Semaphore(name, 3)
	ps := []*dlock.Lease{mustAcquire(t, sem3), mustAcquire(t, sem3), mustAcquire(t, sem3)}
	l, err := a.Semaphore(name, 3).TryAcquire(t.Context())
	wantRefused(t, "a fourth permit of 3", l, err)
	for _, l := range ps {
		unlock(t, l)
	}
}

func (s *suite) testSemaphoreInspect(t *testing.T) {
	name := lockName(t)
	a, b := s.client(t), s.client(t)
	p1 := mustAcquire(t, a.Semaphore(name, 3, dlock.WithLabel("permit-one")))
	p2 := mustAcquire(t, b.Semaphore(name, 3))
	info, err := b.InspectSemaphore(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Held || info.Limit != 3 || len(info.Holders) != 2 || info.Kind != dlock.KindPermit {
		t.Fatalf("InspectSemaphore = %+v; want 2 holders of 3 permits", info)
	}
	toks := map[string]uint64{}
	for _, h := range info.Holders {
		toks[h.Owner] = h.Token
		if h.Kind != dlock.KindPermit {
			t.Errorf("holder %+v; want kind permit", h)
		}
		if h.Owner == p1.Owner() && !s.caps.NoLabels && h.Label != "permit-one" {
			t.Errorf("holder label %q; want permit-one", h.Label)
		}
	}
	if toks[p1.Owner()] != p1.Token() || toks[p2.Owner()] != p2.Token() {
		t.Fatalf("holders %+v; want %s:%d and %s:%d", info.Holders, p1.Owner(), p1.Token(), p2.Owner(), p2.Token())
	}
	unlock(t, p1)
	unlock(t, p2)
	info, err = a.InspectSemaphore(t.Context(), name)
	if err != nil || info.Held || len(info.Holders) != 0 {
		t.Fatalf("InspectSemaphore after Unlock = %+v, %v; want free", info, err)
	}
}
