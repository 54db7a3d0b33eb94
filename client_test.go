package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/memlock"
)

// Close wakes every waiter with ErrClosed and ends held leases with ErrClosed.
func TestCloseWakesWaiters(t *testing.T) {
	a, b := memlock.Open(), memlock.Open()
	defer a.Close()
	ctx := t.Context()
	if _, err := a.Mutex("x").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := b.Mutex("y").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// b waits on its own store's lock held by another owner of b.
	if _, err := b.Mutex("z").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := b.Mutex("z").Lock(ctx); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiter after Close: %v; want ErrClosed", err)
	}
	<-l.Done()
	if !errors.Is(l.Err(), dlock.ErrClosed) {
		t.Fatalf("lease after Close: %v", l.Err())
	}
}

func TestHooks(t *testing.T) {
	var mu sync.Mutex
	var events []string
	var renewed atomic.Bool
	rec := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	c := memlock.Open(dlock.WithHooks(dlock.Hooks{
		Acquired: func(_ context.Context, e dlock.Event) { rec(fmt.Sprintf("acquired %s %d", e.Name, e.Token)) },
		Refused: func(_ context.Context, e dlock.Event) {
			rec(fmt.Sprintf("refused %s %v", e.Name, errors.Is(e.Err, dlock.ErrNotAcquired)))
		},
		Released: func(_ context.Context, e dlock.Event) { rec(fmt.Sprintf("released %s %d", e.Name, e.Token)) },
		Renewed: func(_ context.Context, e dlock.Event) {
			if e.Err == nil && e.Latency > 0 {
				renewed.Store(true)
			}
		},
		Lost: func(_ context.Context, e dlock.Event) {
			rec(fmt.Sprintf("lost %s %d %v", e.Name, e.Token, errors.Is(e.Err, dlock.ErrLeaseLost)))
		},
	}))
	defer c.Close()
	ctx := t.Context()
	l, _ := c.Mutex("h", dlock.WithTTL(600*time.Millisecond)).Lock(ctx)
	_, _ = c.Mutex("h").TryLock(ctx)
	time.Sleep(700 * time.Millisecond) // past its TTL: renewed every 200ms
	_ = l.Unlock(ctx)
	l, _ = c.Mutex("h", dlock.WithTTL(20*time.Millisecond), dlock.WithoutRenewal()).Lock(ctx)
	<-l.Done()
	// Done closes first, then the Lost hook runs (a slow hook must not hold
	// Done back): wait for it.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n >= 5 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !renewed.Load() {
		t.Errorf("Renewed hook not called with a latency")
	}
	want := "acquired h 1,refused h true,released h 1,acquired h 2,lost h 2 true"
	if got := strings.Join(events, ","); got != want {
		t.Fatalf("events %q; want %q", got, want)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := t.Context()
	_, err := dlock.Open(ctx, "nosuch://host")
	if !errors.Is(err, dlock.ErrUnknownScheme) || !strings.Contains(err.Error(), "forgotten import") {
		t.Errorf("unknown scheme: %v", err)
	}
	for _, u := range []string{"no-scheme", "", "://x"} {
		if _, err := dlock.Open(ctx, u); !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v; want ErrInvalidURL", u, err)
		}
	}
	for _, u := range []string{"redis://user:s3cret@host:bad/", "redis://user:s3cret@[::1/", "nosuch://user:s3cret@host/",
		"nosuch://host/?sentinel_password=s3cret", "redis+sentinel://127.0.0.1:1/m?sentinel_password=s3cret"} {
		_, err := dlock.Open(ctx, u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v; want an error without the password", u, err)
		}
	}
	// TLS key paths and key passwords are secrets too: neither the URL in
	// the error nor the backend's own error text may show them.
	dlock.Register("keyleak", driver.OpenerFunc(func(_ context.Context, u *url.URL) (driver.Driver, error) {
		q := u.Query()
		return nil, fmt.Errorf("keyleak: cannot load %s with %s (%s)", q.Get("key"), q.Get("sslpassword"), url.QueryEscape(q.Get("key")))
	}))
	for _, u := range []string{
		"keyleak://h/?cert=/c.pem&key=/etc/s3cret/k.pem&sslpassword=s3cret",
		"nosuch://h/?key=/etc/s3cret/k.pem&sslkey=/etc/s3cret/k.pem",
	} {
		_, err := dlock.Open(ctx, u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v; want an error without the key path or its password", u, err)
		}
	}
	var nilCtx context.Context
	if _, err := dlock.Open(nilCtx, "mem://"); !errors.Is(err, dlock.ErrNilContext) {
		t.Errorf("Open(nil ctx) = %v", err)
	}
}

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on duplicate Register")
		}
	}()
	dlock.Register(memlock.Scheme, nil)
}

func TestOwnerIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := dlock.NewOwnerID()
		if len(id) != 32 || seen[id] {
			t.Fatalf("owner id %q: want 32 hex digits, unique", id)
		}
		seen[id] = true
	}
}

func TestParseURLHostList(t *testing.T) {
	u, err := driver.ParseURL("redlock://user:pw@h1:6379,h2:6380,[::1]:6381/0?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if got := driver.Hosts(u); strings.Join(got, " ") != "h1:6379 h2:6380 [::1]:6381" {
		t.Errorf("Hosts = %q", got)
	}
	if pw, _ := u.User.Password(); pw != "pw" || u.Path != "/0" || u.Query().Get("x") != "1" {
		t.Errorf("parsed %+v", u)
	}
	if _, err := driver.ParseURL("redlock://h1:6379,,h3:1"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("empty host in list: %v", err)
	}
}
