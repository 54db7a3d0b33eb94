package etcdlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// lateTxn is a gRPC interceptor that models requests held up in the network
// (as the proxy in latereq_test.go does, but one request at a time): a held
// Txn is answered to its caller with the attempt's own timeout, and sent to
// etcd for real, detached, `delay` later.
type lateTxn struct {
	mu sync.Mutex
	// holdPut: the next Txn that puts a key under pfx and a lease is held
	// for putDelay, and its key becomes key; then, just before it is sent,
	// holdDel (which holds deletes of key) is switched on.
	pfx        string
	key        string
	holdPut    bool
	putDelay   time.Duration
	armOnLand  bool
	holdDel    bool
	delDelay   time.Duration
	heldDels   atomic.Int32
	landedPut  chan struct{}
	landedDels atomic.Int32
}

func (lt *lateTxn) interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	tr, ok := req.(*etcdserverpb.TxnRequest)
	if !ok || method != "/etcdserverpb.KV/Txn" {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	lt.mu.Lock()
	isPut, isDel := "", false
	for _, op := range tr.Success {
		if p := op.GetRequestPut(); p != nil && strings.HasPrefix(string(p.Key), lt.pfx) && p.Lease != 0 {
			isPut = string(p.Key)
		}
		if d := op.GetRequestDeleteRange(); d != nil && lt.key != "" && string(d.Key) == lt.key {
			isDel = true
		}
	}
	switch {
	case isPut != "" && lt.holdPut:
		lt.holdPut, lt.key = false, isPut
		d := lt.putDelay
		arm := lt.armOnLand
		lt.mu.Unlock()
		go func() {
			time.Sleep(d)
			if arm {
				lt.mu.Lock()
				lt.holdDel = true
				lt.mu.Unlock()
			}
			_ = invoker(context.Background(), method, req, &etcdserverpb.TxnResponse{}, cc) // not opts: they write into the caller's call
			close(lt.landedPut)
		}()
		<-ctx.Done()
		return ctx.Err()
	case isDel && lt.holdDel:
		d := lt.delDelay
		lt.mu.Unlock()
		lt.heldDels.Add(1)
		go func() {
			time.Sleep(d)
			_ = invoker(context.Background(), method, req, &etcdserverpb.TxnResponse{}, cc) // not opts: they write into the caller's call
			lt.landedDels.Add(1)
		}()
		<-ctx.Done()
		return ctx.Err()
	}
	lt.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// openVia opens a dlock client on the etcd at srv whose requests go
// through the test's gRPC interceptor.
func openVia(t *testing.T, srv string, interceptor grpc.UnaryClientInterceptor) *dlock.Client {
	cfg := clientv3.Config{Endpoints: []string{"http://" + srv}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(interceptor)}}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return openCli(t, cli)
}

// The sweeper of a phantom key (a put that landed after its contender was
// done) gives up a check after sweepCheckTimeout. It once freed the
// client's slot for the name then, while its delete of the phantom (under
// the phantom's create revision R) could still be in flight: the client's
// next contender put the same key, adopted the phantom with revision R,
// and the late delete took its key while it held (another client was then
// granted beside it). An unconfirmed delete now keeps the slot until the
// key is known gone, as a release's does.
func TestSweepLateDeleteTakesNoAdoptedKey(t *testing.T) {
	const sweepCheck = 5 * time.Second // etcdlock's sweepCheckTimeout
	srv := testserver.Etcd(t).Addr()
	name := "sweep/" + t.Name()
	ttl := dlock.WithTTL(10 * time.Second)
	lt := &lateTxn{landedPut: make(chan struct{})}
	a := openVia(t, srv, lt.interceptor)
	b := open(t, "http://"+srv)
	ctx := t.Context()

	l0, err := a.Mutex(name, ttl).Lock(ctx) // A's session is granted
	if err != nil {
		t.Fatal(err)
	}
	if err := l0.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// C1's first put is held back 1.5 s (its retry is granted); once it
	// lands, every delete of its key is held back 6 s, until just after the
	// sweeper's check gave up with its deletes in flight.
	lt.mu.Lock()
	lt.pfx, lt.holdPut, lt.putDelay, lt.armOnLand, lt.delDelay = name+"/", true, 1500*time.Millisecond, true, 6*time.Second
	lt.mu.Unlock()
	l1, err := a.Mutex(name, ttl).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lt.landedPut:
	case <-time.After(10 * time.Second):
		t.Fatal("C1's held-back put never landed")
	}
	for deadline := time.Now().Add(5 * time.Second); lt.heldDels.Load() == 0; { // the sweeper has the slot
		if time.Now().After(deadline) {
			t.Fatal("the sweeper sent no delete of the phantom key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.AfterFunc(sweepCheck+500*time.Millisecond, func() {
		lt.mu.Lock()
		lt.holdDel = false
		lt.mu.Unlock()
	})

	// A's next contender waits for the slot behind the sweeper.
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	l3, err := a.Mutex(name, ttl).Lock(lctx)
	cancel()
	if err != nil {
		t.Fatalf("A's next Lock: %v", err)
	}
	var e3 *etcdlock.Lease
	l3.As(&e3)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && lt.landedDels.Load() < lt.heldDels.Load(); {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	t.Logf("held-back deletes: %d, all landed", lt.heldDels.Load())
	resp, err := adminClient(t, []string{"http://" + srv}).Get(ctx, e3.Key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != e3.Revision {
		t.Errorf("A's holder's key %s (revision %d) after the held-back deletes landed: %v; want it kept", e3.Key, e3.Revision, resp.Kvs)
	}
	if l, err := b.Mutex(name, ttl).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = l.Unlock(ctx)
		}
		t.Errorf("B's TryLock while A holds = %v; want ErrNotAcquired", err)
	}
	if err := l3.Unlock(ctx); err != nil {
		t.Errorf("A's Unlock: %v", err)
	}
}
