package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/memlock"
)

func memDriver(t *testing.T, c *dlock.Client) *memlock.Driver {
	t.Helper()
	var d *memlock.Driver
	if !c.As(&d) {
		t.Fatal("As(*memlock.Driver) failed")
	}
	return d
}

// One scheduler renews every lease of a client in one driver call per tick,
// and the number of goroutines does not grow with the number of leases.
func TestRenewalIsBatched(t *testing.T) {
	c := memlock.Open()
	defer c.Close()
	d := memDriver(t, c)
	ctx := t.Context()
	const n = 1000
	const ttl = 300 * time.Millisecond
	before := runtime.NumGoroutine()
	leases := make([]*dlock.Lease, 0, n)
	taking := time.Now()
	for i := range n {
		l, err := c.Mutex(fmt.Sprintf("batch/%d", i), dlock.WithTTL(ttl)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	spread := time.Since(taking) // leases taken this far apart fall due this far apart
	if g := runtime.NumGoroutine() - before; g > 2 {
		t.Errorf("%d more goroutines with %d leases held", g, n)
	}
	start := d.RenewCalls()
	time.Sleep(3 * ttl)
	calls := d.RenewCalls() - start
	// Every lease is renewed every ttl/3, 9 times in 3 TTLs. Leases due
	// within a tenth of an interval of each other share a batch, so the
	// batches per interval are bounded by how far apart the leases were
	// taken (a few ms normally, more under -race on a loaded machine) — and
	// never by their number: unbatched, this would be about 9,000 calls.
	window := ttl / 3 / 10
	perInterval := int64(spread/window) + 2
	if calls < 6 || calls > 9*perInterval || calls > n/10 {
		t.Errorf("%d Renew calls for %d leases taken over %v, over 3 TTLs; want at most %d (one batch per %v of spread per interval)",
			calls, n, spread, 9*perInterval, window)
	}
	t.Logf("%d Renew calls for %d leases taken over %v", calls, n, spread)
	for _, l := range leases {
		if l.Err() != nil {
			t.Fatalf("lease lost: %v", l.Err())
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A renewal that fails for an uncertain reason is retried, and the lease
// survives if the store comes back before the lease could expire.
func TestUncertainRenewalFailureRecovers(t *testing.T) {
	c := memlock.Open()
	defer c.Close()
	d := memDriver(t, c)
	const ttl = 600 * time.Millisecond
	l, err := c.Mutex("flaky", dlock.WithTTL(ttl)).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d.Cut()
	time.Sleep(ttl / 2) // the renewal due at ttl/3 fails
	d.Heal()
	time.Sleep(ttl)
	if l.Err() != nil {
		t.Fatalf("lease lost after a short outage: %v", l.Err())
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// Waiters of one client for one name queue locally: a release makes one of
// them try, not all of them.
func TestNoHerdWithinClient(t *testing.T) {
	holder, waiters := memlock.Open(), memlock.Open()
	defer holder.Close()
	defer waiters.Close()
	ctx := t.Context()
	l, err := holder.Mutex("herd").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := memDriver(t, waiters)
	const n = 20
	var wg sync.WaitGroup
	got := make(chan *dlock.Lease)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := waiters.Mutex("herd", dlock.WithTTL(time.Minute)).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- l
		}()
	}
	for d.AcquireCalls() < n { // every waiter made its first attempt
		time.Sleep(time.Millisecond)
	}
	base := d.AcquireCalls()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := (<-got).Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// n handoffs: each takes the head's attempt, plus at most one more for
	// the next head's first try after subscribing.
	if calls := d.AcquireCalls() - base; calls > 2*n+1 {
		t.Errorf("%d acquire attempts for %d handoffs: waiters are stampeding", calls, n)
	}
}

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
	l, _ := c.Mutex("h", dlock.WithTTL(30*time.Millisecond)).Lock(ctx)
	_, _ = c.Mutex("h").TryLock(ctx)
	time.Sleep(40 * time.Millisecond) // renewed every 10ms
	_ = l.Unlock(ctx)
	l, _ = c.Mutex("h", dlock.WithTTL(20*time.Millisecond), dlock.WithoutRenewal()).Lock(ctx)
	<-l.Done()
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
	for _, u := range []string{"redis://user:s3cret@host:bad/", "redis://user:s3cret@[::1/", "nosuch://user:s3cret@host/"} {
		_, err := dlock.Open(ctx, u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) = %v; want an error without the password", u, err)
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
	u, err := dlock.ParseURL("redlock://user:pw@h1:6379,h2:6380,[::1]:6381/0?x=1")
	if err != nil {
		t.Fatal(err)
	}
	if got := dlock.Hosts(u); strings.Join(got, " ") != "h1:6379 h2:6380 [::1]:6381" {
		t.Errorf("Hosts = %q", got)
	}
	if pw, _ := u.User.Password(); pw != "pw" || u.Path != "/0" || u.Query().Get("x") != "1" {
		t.Errorf("parsed %+v", u)
	}
	if _, err := dlock.ParseURL("redlock://h1:6379,,h3:1"); !errors.Is(err, dlock.ErrInvalidURL) {
		t.Errorf("empty host in list: %v", err)
	}
}
