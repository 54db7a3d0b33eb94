package etcdlock_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/etcdlock"
	"github.com/dlock/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A contender whose given-up key could not be deleted at once keeps its
// client's slot for the name until the background delete is done. Before,
// the slot was freed at once: the client's next contender put the same key
// (it is named after the session lease), was granted with it, and the late
// delete then removed the key of a holder, letting another client in.
func TestLateDropTakesNoHoldersKey(t *testing.T) {
	addr := testserver.Etcd(t).Addr()
	u := "etcd://" + addr
	a, b, c := drivertest.MustOpen(t, u), drivertest.MustOpen(t, u), drivertest.MustOpen(t, u)
	ctx := t.Context()
	const name = "late-drop"

	held, err := b.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inBackground, letGo := holdBackDrops(t)

	// a's TryLock puts its key, finds b first, gives the key up; the delete
	// fails and is left to the background, held back.
	if l, err := a.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while b holds the lock = %v, %v; want ErrNotAcquired", l, err)
	}
	inBackground()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// a locks again: it waits for its slot while the key is being dropped
	// (before, it was granted at once, with that key), and then takes a
	// key of its own.
	got := drivertest.Go(func() (*dlock.Lease, error) { return a.Mutex(name).Lock(ctx) })
	got.WantPending(t, time.Second, "a's Lock while its given-up key is still being deleted")
	letGo()
	l := got.Want(t, 10*time.Second, "a's Lock")
	var el *etcdlock.Lease
	if !l.As(&el) {
		t.Fatal("not an etcd lease")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// However long the late delete takes, a's key stays, and nobody else
	// gets the lock while a holds it.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		resp, err := cli.Get(ctx, el.Key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != el.Revision {
			t.Fatalf("the holder's key %s (revision %d) is gone while it holds the lock: %v", el.Key, el.Revision, resp.Kvs)
		}
	}
	if other, err := c.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another client's TryLock while a holds the lock = %v, %v; want ErrNotAcquired", other, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// holdBackDrops makes a contender's first delete of its given-up key fail,
// and holds the background delete that follows back until letGo (also
// called at cleanup). inBackground waits until that delete has started.
func holdBackDrops(t *testing.T) (inBackground, letGo func()) {
	t.Helper()
	var started atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	letGo = func() { once.Do(func() { close(release) }) }
	etcdlock.SetDropHook(func(background bool) error {
		if !background {
			return errors.New("test: the first delete fails")
		}
		started.Store(true)
		<-release
		return nil
	})
	t.Cleanup(func() { letGo(); etcdlock.SetDropHook(nil) })
	inBackground = func() {
		t.Helper()
		for end := time.Now().Add(10 * time.Second); !started.Load(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("the given-up key's delete did not go to the background")
			}
		}
	}
	return inBackground, letGo
}
