package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/redislock"
	"github.com/redis/go-redis/v9"
)

// TestCloseEndsWaitOnAppClient: a Lock queued behind a holder ends with
// ErrClosed when its dlock client closes, and leaves nothing behind: the
// holder's Unlock leaves the lock free for another client at once. The
// go-redis client underneath is the application's and stays open, so only
// dlock's binding of the wait to Close can end it. Close comes at random
// moments, some during the Lock's first round trip, some while it waits.
func TestCloseEndsWaitOnAppClient(t *testing.T) {
	srv := testserver.Redis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	open := func() *dlock.Client {
		c, err := redislock.Open(t.Context(), rdb, redislock.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := open(), open()
	for round := range 20 {
		name := fmt.Sprintf("closewait/%d", round)
		held, err := a.Mutex(name).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		c := open()
		w := drivertest.Go(func() (*dlock.Lease, error) { return c.Mutex(name).Lock(t.Context()) })
		time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond) // setup: queued, or not yet
		if err := c.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		// The holder still holds: a wait not ended by Close would run on.
		if l, err := w.Result(t, 10*time.Second, "the closed client's Lock"); !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("round %d: the closed client's Lock = %v, %v; want ErrClosed", round, l, err)
		}
		if err := held.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := b.Mutex(name).TryLock(t.Context())
		if err != nil {
			info, _ := b.Inspect(t.Context(), name)
			t.Fatalf("round %d: after the holder's Unlock, TryLock = %v; the store has %+v", round, err, info)
		}
		if err := got.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCloseEndsSilentFirstRoundTrip: the network to Redis goes silent (no
// reset, no FIN) just before a blocking Lock, so its first round trip hangs
// in go-redis, which cannot cut a read short but checks the call's context
// before each retry. Close must end that Lock with ErrClosed once the
// attempt in flight gives up (and the script that takes the request back
// out of the queue has had its bounded try), not after every retry go-redis
// would make (up to 20 here, of 300 ms each, on the application's client,
// which dlock never closes): dlock binds the whole call to Close, its first round trip
// included, so go-redis gives the acquire script up with context.Canceled.
// Close comes as the Lock's first attempt is sent. (A binding made only once
// the Lock queued, as tried for issue #29, let the retries run: Close then
// waited up to its 10 s drain.)
func TestCloseEndsSilentFirstRoundTrip(t *testing.T) {
	srv := testserver.Redis(t)
	const name = "closewait/silent"
	holder := openURL(t, srv)
	held, err := holder.Mutex(name).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(t.Context())
	p, rdb, c := silentClient(t, srv)
	sent, first := watchFirstFCALL(rdb)
	p.Blackhole()
	w := drivertest.Go(func() (*dlock.Lease, error) { return c.Mutex(name).Lock(t.Context()) })
	<-sent // the acquire script is on its way, into the silence
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l, err := w.Result(t, 30*time.Second, "the closed client's Lock")
	if !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock = %v, %v; want ErrClosed", l, err)
	}
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the Lock's acquire script ended with %v; want it cut short by Close (context.Canceled)", err)
	}
}

// silentClient opens a dlock client over an application's go-redis client
// that reaches srv through a proxy the test can silence or slow, and that
// would retry a command 20 times, each attempt on a new connection after a
// 300 ms read timeout.
func silentClient(t *testing.T, srv *testserver.Server) (*testserver.Proxy, *redis.Client, *dlock.Client) {
	p := testserver.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, DialTimeout: time.Second,
		MaxRetries: 20, MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := redislock.Open(t.Context(), rdb, redislock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return p, rdb, c
}

// watchFirstFCALL hooks rdb: sent closes as the next FCALL is processed,
// and first receives its error once go-redis is through with it, retries
// and all.
func watchFirstFCALL(rdb *redis.Client) (sent chan struct{}, first chan error) {
	sent, first = make(chan struct{}), make(chan error, 1)
	var once sync.Once
	rdb.AddHook(fcallSeen{
		sent: func() { once.Do(func() { close(sent) }) },
		done: func(err error) {
			select {
			case first <- err:
			default:
			}
		}})
	return sent, first
}

// TestCloseEndsNestedLock: a nested Lock (its ctx carries the caller's
// lease, so it re-enters the hold and the store counts it once more) is
// bound to Close as a first acquire is. With the network silent, go-redis
// gives the re-entry's script up with context.Canceled and the Lock ends
// with ErrClosed. With the network slow, the re-entry's reply comes after
// Close began: the Lock returns ErrClosed, not a lease, and gives back the
// count it added, so the store holds nothing once Close returns.
func TestCloseEndsNestedLock(t *testing.T) {
	for _, silent := range []bool{true, false} {
		t.Run(map[bool]string{true: "silent", false: "slow"}[silent], func(t *testing.T) {
			srv := testserver.Redis(t)
			raw := rawClient(t, srv)
			p, rdb, c := silentClient(t, srv)
			name := "closewait/nested/" + t.Name()
			outer, err := c.Mutex(name).Lock(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			key := "dlock:{" + name + "}"
			if n, err := raw.Exists(t.Context(), key).Result(); n != 1 {
				t.Fatalf("the held lock's key %q is not in the store (%v)", key, err)
			}
			sent, first := watchFirstFCALL(rdb)
			if silent {
				p.Blackhole()
			} else {
				p.SetDelay(100 * time.Millisecond)
			}
			w := drivertest.Go(func() (*dlock.Lease, error) {
				return c.Mutex(name).Lock(dlock.ContextWithLease(t.Context(), outer))
			})
			<-sent                // the re-entry is on its way
			closeErr := c.Close() // in the silence, the outer hold's release fails
			l, err := w.Result(t, 30*time.Second, "the closed client's nested Lock")
			if !errors.Is(err, dlock.ErrClosed) {
				t.Fatalf("nested Lock = %v, %v; want ErrClosed", l, err)
			}
			if silent {
				if err := <-first; !errors.Is(err, context.Canceled) {
					t.Errorf("the re-entry's script ended with %v; want it cut short by Close (context.Canceled)", err)
				}
				return
			}
			if closeErr != nil {
				t.Fatalf("Close: %v", closeErr)
			}
			p.SetDelay(0)
			if all, err := raw.HGetAll(t.Context(), key).Result(); err != nil || len(all) != 0 {
				t.Errorf("after Close the store still holds the lock: %q, %v", all, err)
			}
		})
	}
}

// fcallSeen is a go-redis hook that calls sent as an FCALL is processed,
// and done with its error once go-redis is through with it.
type fcallSeen struct {
	sent func()
	done func(error)
}

func (fcallSeen) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h fcallSeen) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !strings.EqualFold(cmd.Name(), "fcall") {
			return next(ctx, cmd)
		}
		h.sent()
		err := next(ctx, cmd)
		h.done(err)
		return err
	}
}
func (fcallSeen) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCloseWaitsForUnlocks: an Unlock racing Close has its release sent
// before Close closes the driver. Close releases the holds it finds
// attached; one an Unlock had already detached is the Unlock's to release,
// and a client dlock made from a URL closes its go-redis client with the
// driver, so a release still under way then failed ("client is closed")
// and the lock stayed held until its TTL. Found by an adversary pass.
// Whichever comes first, another client must get the lock at once.
func TestCloseWaitsForUnlocks(t *testing.T) {
	srv := testserver.Redis(t)
	other := openURL(t, srv)
	for round := range 200 {
		name := fmt.Sprintf("closewait/unlock/%d", round)
		c, err := dlock.Open(t.Context(), "redis://"+srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.Mutex(name, dlock.WithTTL(time.Minute)).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = l.Unlock(t.Context()) // ErrClosed if Close came first
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.N(300)) * time.Microsecond) // either may come first
			if err := c.Close(); err != nil {
				t.Errorf("round %d: Close: %v", round, err)
			}
		}()
		wg.Wait()
		got, err := other.Mutex(name).TryLock(t.Context())
		if err != nil {
			info, _ := other.Inspect(t.Context(), name)
			t.Fatalf("round %d: after Unlock and Close, TryLock = %v; the store has %+v", round, err, info)
		}
		if err := got.Unlock(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
