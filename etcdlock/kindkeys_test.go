package etcdlock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

func keyOf(t *testing.T, l *dlock.Lease) string {
	t.Helper()
	var el *etcdlock.Lease
	if !l.As(&el) {
		t.Fatal("not an etcd lease")
	}
	return el.Key
}

// A client's read-write lock and semaphore keys reuse their names once
// their keys are gone, so that a name acquired over and over leaves as
// many deleted keys in etcd's index as the client had contenders at once,
// not one per acquisition. Keys held at once have names of their own.
func TestKindKeysAreReused(t *testing.T) {
	c := open(t, embedded(t)...)
	ctx := t.Context()
	sem := c.Semaphore("reuse", 4)
	names := map[string]bool{}
	for range 5 {
		l, err := sem.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names[keyOf(t, l)] = true
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(names) != 1 {
		t.Fatalf("5 permits acquired one after another used %d key names (%v); want 1", len(names), names)
	}
	l1, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := keyOf(t, l1), keyOf(t, l2)
	if k1 == k2 {
		t.Fatalf("two permits held at once share the key %q", k1)
	}
	if !names[k1] && !names[k2] {
		t.Errorf("neither permit held at once (%q, %q) reused the earlier name %v", k1, k2, names)
	}
	for _, l := range []*dlock.Lease{l1, l2} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rw := c.RWMutex("reuse")
	var first string
	for i := range 3 {
		l, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if k := keyOf(t, l); i == 0 {
			first = k
		} else if k != first {
			t.Errorf("read hold %d's key %q; want the first's name %q again", i, k, first)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A permit whose put had no certain answer (held back past its attempt's
// timeout; the retry was granted) may still see that put land later: its
// key's name is not used again, or the held-back put could land on a later
// contender's behalf.
func TestKindKeyOfUncertainPutIsNotReused(t *testing.T) {
	srv := testserver.Etcd(t).Addr()
	lt := &lateTxn{landedPut: make(chan struct{})}
	c := openVia(t, srv, lt.interceptor)
	ctx := t.Context()
	sem := c.Semaphore("uncertain/"+t.Name(), 2, dlock.WithTTL(10*time.Second))
	l0, err := sem.Acquire(ctx) // the session is granted, and the name's first key used once
	if err != nil {
		t.Fatal(err)
	}
	k0 := keyOf(t, l0)
	if err := l0.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lt.mu.Lock()
	lt.pfx, lt.holdPut, lt.putDelay = k0[:len(k0)-len("0")], true, 1500*time.Millisecond // the key's name without its number
	lt.mu.Unlock()
	l1, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k1 := keyOf(t, l1)
	if k1 != k0 {
		t.Fatalf("the permit after the first used %q; want the first's name %q again", k1, k0)
	}
	select {
	case <-lt.landedPut:
	case <-time.After(10 * time.Second):
		t.Fatal("the held-back put never landed")
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := sem.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if k2 := keyOf(t, l2); k2 == k1 {
		t.Fatalf("the permit after an uncertain put used its key's name %q again", k2)
	}
	var el *etcdlock.Lease
	l2.As(&el)
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Once the session is lost, no put can land under its lease: the pool
	// that kept the burnt name goes when the next session starts (here for
	// a Mutex of the same TTL, which finds the lease gone).
	etcdlock.PauseKeepAlives(c)
	if _, err := adminClient(t, []string{"http://" + srv}).Revoke(ctx, el.LeaseID); err != nil {
		t.Fatal(err)
	}
	l3, err := c.Mutex("uncertain/"+t.Name(), dlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l3.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := etcdlock.KindPools(c); n > 0 {
		t.Errorf("%d pools of key names kept after the session with a burnt name was lost, nothing held", n)
	}
}

// slowPuts delays every Txn that puts a key under pfx with a lease (not
// past the attempt's timeout), then sends it.
type slowPuts struct {
	pfx   atomic.Pointer[string]
	delay time.Duration
}

func (s *slowPuts) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if tr, ok := req.(*etcdserverpb.TxnRequest); ok && method == "/etcdserverpb.KV/Txn" {
		if p := s.pfx.Load(); p != nil {
			for _, op := range tr.Success {
				if put := op.GetRequestPut(); put != nil && put.Lease != 0 && strings.HasPrefix(string(put.Key), *p) {
					time.Sleep(s.delay)
				}
			}
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// A session lease revoked behind the client's back (its keepalives paused,
// as a paused process's), then a permit's Acquire whose ctx ends while its
// put is out: etcd answers "lease not found", which says for certain that
// no key went in. The name must not be burnt for it, and no pool of names
// of a lost session may stay: one more would stay per such round, until
// the client closed. (Found by an adversary pass: the answer was hidden
// inside ctx's error.)
func TestKindPoolsOfLostSessionsGo(t *testing.T) {
	srv := testserver.Etcd(t).Addr()
	sp := &slowPuts{delay: 60 * time.Millisecond}
	c := openVia(t, srv, sp.interceptor)
	admin := adminClient(t, []string{"http://" + srv})
	ctx := t.Context()
	sem := c.Semaphore("lost-pools", 2, dlock.WithTTL(10*time.Second))
	pfx := "\x00sem\x00lost-pools\x00"
	for round := range 3 {
		l, err := sem.Acquire(ctx) // a session
		if err != nil {
			t.Fatal(err)
		}
		etcdlock.PauseKeepAlives(c)
		unlockAndRevoke(t, admin, l)
		sp.pfx.Store(&pfx)
		actx, cancel := context.WithTimeout(ctx, 20*time.Millisecond) // ends while the put is out
		_, err = sem.Acquire(actx)
		cancel()
		sp.pfx.Store(nil)
		if err == nil {
			t.Fatalf("round %d: Acquire on a revoked session within 20 ms succeeded", round)
		}
	}
	if n := etcdlock.KindPools(c); n > 0 {
		t.Errorf("%d pools of key names kept after 3 lost sessions, nothing held", n)
	}
}
