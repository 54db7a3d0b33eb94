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

// The conformance tests of read-write locks (see kinds.go).

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
	)
	see := func(tok uint64) {
		for m := maxSeen.Load(); tok > m && !maxSeen.CompareAndSwap(m, tok); m = maxSeen.Load() {
		}
	}
	write := func(w int) bool { return w%3 == 0 }
	contendFor(t, workers, 2*time.Second, 10*time.Second, func(w int) (string, func(context.Context) (*dlock.Lease, error)) {
		rw := clients[w%2].RWMutex(name, dlock.WithTTL(5*time.Second))
		if write(w) {
			return "Lock", rw.Lock
		}
		return "RLock", rw.RLock
	}, func(w int, l *dlock.Lease) {
		if write(w) {
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
			return
		}
		readers.Add(1)
		if n := writers.Load(); n != 0 {
			t.Errorf("worker %d: reader inside with %d writers", w, n)
		}
		see(l.Token())
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		reads.Add(1)
		readers.Add(-1)
	})
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
	a := s.client(t)
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
	info, err := a.RWMutex(name).Inspect(t.Context())
	if err != nil || info.Held || len(info.Holders) != 0 {
		t.Fatalf("RWMutex.Inspect of a free lock = %+v, %v", info, err)
	}
	r1 := mustRLock(t, a.RWMutex(name, dlock.WithLabel("reader-one")))
	r2 := mustRLock(t, b.RWMutex(name))
	info, err = b.RWMutex(name).Inspect(t.Context())
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
	info, err = b.RWMutex(name).Inspect(t.Context())
	if err != nil || !info.Held || len(info.Holders) != 1 || info.Holders[0].Kind != dlock.KindWrite ||
		info.Owner != w.Owner() || info.Token != w.Token() || info.Kind != dlock.KindWrite {
		t.Fatalf("Inspect with a writer = %+v, %v; want the writer %s, token %d", info, err, w.Owner(), w.Token())
	}
	unlock(t, w)
	info, err = b.RWMutex(name).Inspect(t.Context())
	if err != nil || info.Held || len(info.Holders) != 0 {
		t.Fatalf("Inspect after Unlock = %+v, %v; want free", info, err)
	}
}
