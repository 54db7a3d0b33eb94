package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
)

// dropKind is one kind of hold a contender's key can be dropped from: how
// the holder takes the name, how the contender does, and how to read the
// kind's state.
type dropKind struct {
	name      string
	holder    func(c *dlock.Client, name string) dlock.Locker
	contender func(c *dlock.Client, name string) dlock.Locker
	inspect   func(ctx context.Context, c *dlock.Client, name string) (dlock.Info, error)
}

var dropKinds = []dropKind{
	{"mutex",
		func(c *dlock.Client, n string) dlock.Locker { return c.Mutex(n) },
		func(c *dlock.Client, n string) dlock.Locker { return c.Mutex(n) },
		func(ctx context.Context, c *dlock.Client, n string) (dlock.Info, error) {
			return c.Mutex(n).Inspect(ctx)
		}},
	{"write",
		func(c *dlock.Client, n string) dlock.Locker { return c.RWMutex(n) },
		func(c *dlock.Client, n string) dlock.Locker { return c.RWMutex(n) },
		func(ctx context.Context, c *dlock.Client, n string) (dlock.Info, error) {
			return c.RWMutex(n).Inspect(ctx)
		}},
	{"read",
		func(c *dlock.Client, n string) dlock.Locker { return c.RWMutex(n) },
		func(c *dlock.Client, n string) dlock.Locker { return c.RWMutex(n).RLocker() },
		func(ctx context.Context, c *dlock.Client, n string) (dlock.Info, error) {
			return c.RWMutex(n).Inspect(ctx)
		}},
	{"permit",
		func(c *dlock.Client, n string) dlock.Locker { return c.Semaphore(n, 1).Locker() },
		func(c *dlock.Client, n string) dlock.Locker { return c.Semaphore(n, 1).Locker() },
		func(ctx context.Context, c *dlock.Client, n string) (dlock.Info, error) {
			return c.Semaphore(n, 1).Inspect(ctx)
		}},
}

// leftFree waits until name shows no hold and no waiter (a given-up key
// being deleted in the background is a waiter until it is gone), failing
// the test if that does not come.
func leftFree(t *testing.T, k dropKind, c *dlock.Client, name string) {
	t.Helper()
	var info dlock.Info
	var err error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		info, err = k.inspect(t.Context(), c, name)
		if err == nil && !info.Held && info.Waiters == 0 && len(info.Holders) == 0 {
			return
		}
	}
	t.Fatalf("%s %q is not left free: %+v, %v", k.name, name, info, err)
}

// keyStays checks that l's key is in place and that another client cannot
// take the name as k's holder does while l holds it.
func keyStays(t *testing.T, k dropKind, l *dlock.Lease, other *dlock.Client, name string) {
	t.Helper()
	var el *etcdlock.Lease
	if !l.As(&el) {
		t.Fatal("not an etcd lease")
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the new holder's lease (key %s) ended: %v", el.Key, err)
	}
	if o, err := k.holder(other, name).TryLock(t.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = o.Unlock(t.Context())
		}
		t.Fatalf("another client's TryLock of %q while a holds it (key %s) = %v; want ErrNotAcquired", name, el.Key, err)
	}
}

// Each kind's refused TryLock whose first delete of its key fails, the
// delete then held back in the background: once the holder lets go, the
// same client takes the name again, and the late delete, when it lands,
// takes only the given-up key: the new holder's stays, nobody else gets
// in, and once all is released nothing is left.
func TestRefusedKindsLateDrop(t *testing.T) {
	u := "etcd://" + testserver.Etcd(t).Addr()
	a, b, c := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)
	for _, k := range dropKinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			name := "refused-" + k.name
			held, err := k.holder(b, name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inBackground, letGo := holdBackDrops(t)

			if l, err := k.contender(a, name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryLock while b holds %q = %v, %v; want ErrNotAcquired", name, l, err)
			}
			inBackground()
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			got := drivertest.Go(func() (*dlock.Lease, error) { return k.contender(a, name).Lock(ctx) })
			letGo()
			l := got.Want(t, 10*time.Second, "a's Lock after b let go")
			etcdlock.SetDropHook(nil)
			// However long the late delete took, it has landed once a's
			// old key is gone: the new one must still be there.
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				info, err := k.inspect(ctx, c, name)
				if err != nil {
					t.Fatal(err)
				}
				if info.Waiters == 0 && len(info.Holders) <= 1 { // a's new hold alone
					break
				}
				if time.Now().After(end) {
					t.Fatalf("a's given-up key is still there: %+v", info)
				}
			}
			keyStays(t, k, l, c, name)
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			leftFree(t, k, c, name)
		})
	}
}

// Each kind's Lock whose ctx ends while it waits in the queue leaves no
// key: once the holder lets go, the name is free for anyone.
func TestCancelledKindsWaitLeavesNoKey(t *testing.T) {
	u := "etcd://" + testserver.Etcd(t).Addr()
	a, b, c := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)
	for _, k := range dropKinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			name := "cancelled-" + k.name
			held, err := k.holder(b, name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			got := drivertest.Go(func() (*dlock.Lease, error) { return k.contender(a, name).Lock(wctx) })
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				info, err := k.inspect(ctx, c, name)
				if err != nil {
					t.Fatal(err)
				}
				if info.Waiters > 0 {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("a's Lock did not queue: %+v", info)
				}
			}
			cancel()
			if _, err := got.Result(t, 10*time.Second, "a's cancelled Lock"); !errors.Is(err, context.Canceled) {
				t.Fatalf("a's cancelled Lock = %v; want context.Canceled", err)
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			leftFree(t, k, c, name)
			l, err := k.holder(c, name).TryLock(ctx)
			if err != nil {
				t.Fatalf("c's TryLock once the name is free: %v", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// Each kind's TryLock whose put reaches etcd but whose reply comes too late
// (the network slows to 0.7 s each way: past the attempt's 1 s) fails, and
// the key it put, which it never heard of, is taken back: once the network
// is well again and the holder lets go, nothing is left, and the same
// client can take the name and keep it.
func TestLateReplyKindsPutLeavesNoKey(t *testing.T) {
	srv := testserver.Etcd(t).Addr()
	p := testserver.NewProxy(t, srv)
	a := drivertest.MustOpen(t, "etcd://"+p.Addr())
	b, c := drivertest.MustOpen(t, "etcd://"+srv), drivertest.MustOpen(t, "etcd://"+srv)
	for _, k := range dropKinds {
		t.Run(k.name, func(t *testing.T) {
			ctx := t.Context()
			name := "late-reply-" + k.name
			held, err := k.holder(b, name).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// a's session is in place (one Lock made it): the put is
			// the TryLock's first call.
			warm, err := a.Mutex("warm").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer warm.Unlock(ctx)
			p.SetDelay(700 * time.Millisecond)
			// A TryLock retries a slow etcd for seconds: 3 s is three
			// attempts, each past its 1 s.
			tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			l, err := k.contender(a, name).TryLock(tctx)
			cancel()
			p.SetDelay(0)
			if err == nil {
				_ = l.Unlock(ctx)
				t.Fatalf("TryLock while b holds %q was granted", name)
			}
			t.Logf("TryLock with its reply late: %v", err)
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			leftFree(t, k, c, name)
			got := drivertest.Go(func() (*dlock.Lease, error) { return k.contender(a, name).Lock(ctx) })
			l = got.Want(t, 10*time.Second, "a's Lock once the name is free")
			keyStays(t, k, l, c, name)
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			leftFree(t, k, c, name)
		})
	}
}
