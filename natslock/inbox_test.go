package natslock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go"
)

// spy is a connection of another user that subscribes on a subject and
// counts what it receives there.
type spy struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	got    atomic.Int64
	denied chan struct{} // closed when the server refuses the subscription
}

// count returns how many messages the spy has received: handled, or
// delivered and waiting for the handler, once every message the server
// sent it before a ping has arrived.
func (s *spy) count(t *testing.T) int64 {
	t.Helper()
	if err := s.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Pending first: a message handled between the two reads is counted
	// twice, never missed.
	var n int64
	if p, _, err := s.sub.Pending(); err == nil {
		n = int64(p)
	}
	return n + s.got.Load()
}

func newSpy(t *testing.T, url, user, pw, subject string) *spy {
	t.Helper()
	s := &spy{denied: make(chan struct{})}
	var once atomic.Bool
	nc, err := nats.Connect(url, nats.UserInfo(user, pw),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) && once.CompareAndSwap(false, true) {
				close(s.denied)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s.nc = nc
	if s.sub, err = nc.Subscribe(subject, func(*nats.Msg) { s.got.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the subscription (or refused it)
		t.Fatal(err)
	}
	return s
}

// lockUnlock takes and releases name, with a second client holding it
// first so that the wait (a KV watch: an ordered consumer delivering to
// an inbox) and the queue's reads are exercised too.
func lockUnlock(ctx context.Context, t *testing.T, url, name string) {
	t.Helper()
	a1, err := dlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a1.Close()
	a2, err := dlock.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	held, err := a1.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := a2.Mutex(name).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	// Release once a2 waits in the queue, so it is handed the lock.
	for {
		info, err := a1.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters > 0 {
			break
		}
		select {
		case err := <-got:
			t.Fatalf("a2 returned while a1 held the lock: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if _, err := a1.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

// Two users of one account, each with PermissionsInbox and a reply prefix
// of its own: b cannot subscribe to a's replies, and a's dlock (grant,
// wait, handover, release, list) sends every reply to its own prefix.
// With Permissions' _INBOX.> (the default prefix) b could read them.
func TestInboxPrefix(t *testing.T) {
	ctx := t.Context()
	srv := testserver.NATSProcess(t, testserver.NATSConfig(`authorization {
  users = [
    {user: admin, password: adminpw}
    {user: a, password: apw, permissions: `+natslock.PermissionsInbox("bucket-a", "_INBOX_A")+`}
    {user: b, password: bpw, permissions: `+natslock.PermissionsInbox("bucket-b", "_INBOX_B")+`}
    {user: olda, password: apw, permissions: `+natslock.Permissions("bucket-a")+`}
    {user: oldb, password: bpw, permissions: `+natslock.Permissions("bucket-b")+`}
  ]
}`))
	url := "nats://" + srv.Addr()
	for _, b := range []string{"bucket-a", "bucket-b"} {
		c, err := dlock.Open(ctx, "nats://admin:adminpw@"+srv.Addr()+"/"+b)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.Close()
	}

	t.Run("DefaultPrefixIsShared", func(t *testing.T) {
		// The control: with the default prefix, b reads a's replies.
		b := newSpy(t, url, "oldb", "bpw", "_INBOX.>")
		lockUnlock(ctx, t, "nats://olda:apw@"+srv.Addr()+"/bucket-a?create=false", "old")
		if b.count(t) == 0 {
			t.Fatal("b saw none of a's replies on _INBOX.>")
		}
	})

	t.Run("OwnPrefix", func(t *testing.T) {
		b := newSpy(t, url, "b", "bpw", "_INBOX_A.>")
		select {
		case <-b.denied:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not refuse b a subscription on a's inbox prefix")
		}
		bDefault := newSpy(t, url, "b", "bpw", "_INBOX.>")
		select {
		case <-bDefault.denied:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not refuse b a subscription on _INBOX.>")
		}
		// The admin, who may subscribe anywhere, sees where a's replies go.
		onA := newSpy(t, url, "admin", "adminpw", "_INBOX_A.>")
		onDefault := newSpy(t, url, "admin", "adminpw", "_INBOX.>")
		lockUnlock(ctx, t, "nats://a:apw@"+srv.Addr()+"/bucket-a?create=false&inbox_prefix=_INBOX_A", "new")
		if onA.count(t) == 0 {
			t.Fatal("no reply went to a's prefix")
		}
		if n := onDefault.count(t); n != 0 {
			t.Fatalf("%d replies went to _INBOX.>", n)
		}
		if n := b.count(t) + bDefault.count(t); n != 0 {
			t.Fatalf("b received %d of a's replies", n)
		}
	})
}

func TestInboxPrefixURL(t *testing.T) {
	for _, bad := range []string{"x.>", "x.*", "x.", "a%20b"} {
		drivertest.WantOpenError(t, "nats://127.0.0.1:1/b?inbox_prefix="+bad, "inbox_prefix")
	}
}
