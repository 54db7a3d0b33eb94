package etcdlock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
)

// A request the driver gave up on (its attempt timed out) is not known to
// be dead: it can reach etcd seconds later, after a retry through a new
// connection succeeded and the client's next contender for the name put
// the same key (it is named after the session lease). Every delete the
// driver sends must then be one that cannot take that newer key.
//
// Each test sends one of A's deletes into a proxy that holds it for delay,
// lifts the delay and resets A's connections once the attempt has timed
// out (as a NAT or load balancer dropping the flow would), so that the
// retry goes through; A then locks again, and once the held-back requests
// have landed, A's newer key must still be there and B must not get the
// lock.
func TestLateReleaseDeleteTakesNoNewerKey(t *testing.T) {
	lr := newLateRequests(t)
	l1, err := lr.a.Mutex(lr.name, lr.ttl).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	lr.holdBack()
	_ = l1.Unlock(t.Context()) // its first attempt is held back; a retry succeeds
	lr.newerHoldSurvives()
}

// The same for a TryLock whose put was held back: the driver gives the key
// up without knowing its revision, and its deletes, held back too, must
// not take the key of the client's next contender. (Its ctx ends with the
// first attempt: a TryLock retries a slow etcd for seconds.)
func TestLateDropDeleteTakesNoNewerKey(t *testing.T) {
	lr := newLateRequests(t)
	lr.startSession()
	lr.holdBack()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if l, err := lr.a.Mutex(lr.name, lr.ttl).TryLock(ctx); err == nil {
		_ = l.Unlock(t.Context())
		t.Fatal("TryLock through the delay was granted; want its put to time out")
	}
	lr.newerHoldSurvives()
}

// A TryLock through a slow etcd (its first put held back past the
// attempt's 1 s, as a loaded machine's etcd can be) is granted, as a Lock
// is: it used to fail with "context deadline exceeded" although no one
// held the lock and its ctx had no deadline. Its held-back put, landing
// later, takes no newer hold either.
func TestTryLockOutlastsSlowEtcd(t *testing.T) {
	lr := newLateRequests(t)
	lr.startSession()
	lr.holdBack()
	l, err := lr.a.Mutex(lr.name, lr.ttl).TryLock(t.Context())
	if err != nil {
		t.Fatalf("TryLock of a free lock through a slow etcd: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	lr.newerHoldSurvives()
}

// The same for each kind: a TryLock (or TryAcquire) whose first put landed
// but timed out found its own key, from that put, on its retry, and was
// refused by it: "held by another owner" with nobody holding the lock.
func TestTryLockKindsOutlastSlowEtcd(t *testing.T) {
	for _, k := range dropKinds {
		t.Run(k.name, func(t *testing.T) {
			lr := newLateRequests(t)
			lr.startSession()
			// The first put reaches etcd at 0.7 s and is applied; its reply
			// comes at 1.4 s, past the attempt's 1 s. The retry, with the
			// delay lifted, finds the key that put made.
			lr.proxy.SetDelay(700 * time.Millisecond)
			go func() {
				time.Sleep(800 * time.Millisecond)
				lr.proxy.SetDelay(0)
			}()
			l, err := k.contender(lr.a, lr.name).TryLock(t.Context())
			if err != nil {
				t.Fatalf("TryLock of a free %s lock through a slow etcd: %v", k.name, err)
			}
			if err := l.Unlock(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type lateRequests struct {
	t      *testing.T
	proxy  *testserver.Proxy
	conns  *connTracker
	a, b   *dlock.Client
	server string
	name   string
	ttl    dlock.Option
	t0     time.Time
	lifted chan struct{}
}

const lateDelay = 3 * time.Second

func newLateRequests(t *testing.T) *lateRequests {
	srv := testserver.Etcd(t).Addr()
	lr := &lateRequests{t: t, proxy: testserver.NewProxy(t, srv), conns: &connTracker{}, server: srv,
		name: "late/" + t.Name(), ttl: dlock.WithTTL(10 * time.Second)}
	cli, err := newClientv3([]string{"http://" + lr.proxy.Addr()}, lr.conns.dial)
	if err != nil {
		t.Fatal(err)
	}
	lr.a = openCli(t, cli)
	lr.b = open(t, "http://"+srv)
	return lr
}

// startSession has A lock and unlock the name, so that its session lease
// is granted before any delay.
func (lr *lateRequests) startSession() {
	l, err := lr.a.Mutex(lr.name, lr.ttl).Lock(lr.t.Context())
	if err != nil {
		lr.t.Fatal(err)
	}
	if err := l.Unlock(lr.t.Context()); err != nil {
		lr.t.Fatal(err)
	}
}

// holdBack delays what A sends from now on by lateDelay, and after 1.2 s
// (A's attempts time out after 1 s) lifts the delay and resets A's
// connections.
func (lr *lateRequests) holdBack() {
	lr.proxy.SetDelay(lateDelay)
	lr.t0 = time.Now()
	lr.lifted = make(chan struct{})
	go func() {
		defer close(lr.lifted)
		time.Sleep(1200 * time.Millisecond)
		lr.proxy.SetDelay(0)
		lr.conns.reset()
	}()
}

// newerHoldSurvives locks the name again on A and, once every held-back
// request has landed, checks that A's key is still there and B cannot
// take the lock.
func (lr *lateRequests) newerHoldSurvives() {
	t, ctx := lr.t, lr.t.Context()
	<-lr.lifted
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	l2, err := lr.a.Mutex(lr.name, lr.ttl).Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("A's Lock after the delay was lifted: %v", err)
	}
	var el *etcdlock.Lease
	if !l2.As(&el) {
		t.Fatal("not an etcd lease")
	}
	time.Sleep(time.Until(lr.t0.Add(2*lateDelay + 500*time.Millisecond))) // every held-back request has landed
	admin := adminClient(t, []string{"http://" + lr.server})
	resp, err := admin.Get(ctx, el.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != el.Revision {
		t.Errorf("A's newer hold's key %s (create revision %d) after the held-back requests landed: %v; want it kept", el.Key, el.Revision, resp.Kvs)
	}
	if l, err := lr.b.Mutex(lr.name, lr.ttl).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Errorf("B's TryLock while A holds = %v; want ErrNotAcquired", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Errorf("A's Unlock of its newer hold: %v", err)
	}
}

// connTracker is a gRPC dialer that remembers its connections, so that a
// test can reset them all while new dials go through.
type connTracker struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (c *connTracker) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *connTracker) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// A Lock whose put attempt was held back, then retried through a new
// connection and granted: once it is unlocked, the held-back put lands and
// creates a key under A's session that no contender owns. A's client must
// delete it (it watches for such a put after an uncertain attempt), so
// that B gets the lock without waiting for A's client to end.
func TestLatePutLeavesNoPhantomHold(t *testing.T) {
	lr := newLateRequests(t)
	lr.lockAfterLatePut("B", lr.b)
}

// The same late put, landing before A's client locks the name again: the
// key it created is under A's session, first in the queue. A's next
// contender must not wait behind it (it takes the key over, or the sweeper
// has deleted it first): A itself gets the lock.
func TestLatePutBlocksNotItsOwnClient(t *testing.T) {
	lr := newLateRequests(t)
	lr.lockAfterLatePut("A", lr.a)
}

// lockAfterLatePut has A lock the name through a held-back put (its retry
// is granted) and unlock it, waits until the held-back put has landed,
// then has who (A or B) lock the name within 8 s.
func (lr *lateRequests) lockAfterLatePut(who string, c *dlock.Client) {
	t := lr.t
	lr.startSession()
	lr.holdBack()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	l, err := lr.a.Mutex(lr.name, lr.ttl).Lock(ctx)
	cancel()
	if err != nil {
		t.Fatalf("A's Lock through the delay: %v", err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(lr.t0.Add(lateDelay + 500*time.Millisecond))) // the held-back put has landed
	ctx, cancel = context.WithTimeout(t.Context(), 8*time.Second)
	defer cancel()
	l2, err := c.Mutex(lr.name, lr.ttl).Lock(ctx)
	if err != nil {
		info, _ := lr.b.Inspect(t.Context(), lr.name)
		t.Fatalf("%s's Lock after A unlocked and its held-back put landed: %v; the store has %+v", who, err, info)
	}
	if err := l2.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}
