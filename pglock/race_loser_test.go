package pglock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/jackc/pgx/v5"
)

// Two table-mode waiters woken by one release race for the lock; the
// loser's statement, its snapshot taken before the winner's commit, saw no
// live hold and so no time left. It was refused with none, and slept until
// a release message or the wait's longest sleep (5 s): a winner that dies
// sends none. It now reads the winner's time left and tries again when
// that lease ends. (A helper's adversary pass; 11 of 40 natural two-way
// races for an expired row ended so.)
func TestRaceLoserWaitsOutTheWinnersLease(t *testing.T) {
	srv, _, a := tableMode(t)
	ctx := t.Context()
	const name = "race-loser"
	// B and C each go through a proxy, so the winner can be cut off.
	pb := testserver.NewProxy(t, srv.Addr())
	pc := testserver.NewProxy(t, srv.Addr())
	b := drivertest.MustOpen(t, "postgres://postgres@"+pb.Addr()+"/postgres?sslmode=disable&mode=table")
	c := drivertest.MustOpen(t, "postgres://postgres@"+pc.Addr()+"/postgres?sslmode=disable&mode=table")

	la, err := a.Mutex(name, dlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 1500 * time.Millisecond
	// Never unlocked: a holder that dies.
	got := lockEach(ctx, map[string]*dlock.Mutex{"B": b.Mutex(name, dlock.WithTTL(ttl)), "C": c.Mutex(name, dlock.WithTTL(ttl))})
	releaseToRacers(t, srv, name, la)
	first := <-got
	if first.err != nil {
		t.Fatal(first.err)
	}
	// The winner dies: cut its connections, so it neither renews nor releases.
	if first.who == "B" {
		pb.Blackhole()
	} else {
		pc.Blackhole()
	}
	t.Logf("%s won at %v", first.who, first.at.Format("15:04:05.000"))
	select {
	case second := <-got:
		if second.err != nil {
			t.Fatal(second.err)
		}
		d := second.at.Sub(first.at)
		t.Logf("%s got the lock %v after the winner's grant (winner's TTL %v)", second.who, d, ttl)
		if d > ttl+2*time.Second { // liveness: it took WakeMax, 5 s
			t.Errorf("the loser took %v to get a lock whose holder's lease ended after %v", d, ttl)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("loser never got the lock")
	}
}

// Two processes of one owner wait for a lock another owner holds; the
// release wakes both, and their attempts run at once (the token row held,
// as above). The loser's statement saw no live hold, so it could not
// re-enter the winner's, its owner's own; it then slept the owner's lease
// (up to WakeMax, 5 s) before re-entering. It now runs again at once.
// (An adversary pass.)
func TestRaceLoserOfTheSameOwnerReenters(t *testing.T) {
	srv, url, a := tableMode(t)
	ctx := t.Context()
	const name = "race-same-owner"
	b := drivertest.MustOpen(t, url)
	c := drivertest.MustOpen(t, url)
	la, err := a.Mutex(name, dlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := dlock.NewOwnerID()
	got := lockEach(ctx, map[string]*dlock.Mutex{
		"B": b.Mutex(name, dlock.WithTTL(20*time.Second), dlock.WithOwner(owner)),
		"C": c.Mutex(name, dlock.WithTTL(20*time.Second), dlock.WithOwner(owner)),
	})
	releaseToRacers(t, srv, name, la)
	first := <-got
	if first.err != nil {
		t.Fatal(first.err)
	}
	select {
	case second := <-got:
		d := second.at.Sub(first.at)
		t.Logf("%s (token %d) then %s (token %d, %v) %v later; same owner", first.who, first.l.Token(), second.who, second.l.Token(), second.err, d)
		if second.err != nil || second.l.Token() != first.l.Token() {
			t.Errorf("the second process: token %d, %v; want a re-entry of token %d", second.l.Token(), second.err, first.l.Token())
		}
		if d > 2*time.Second { // liveness: it took 5 s
			t.Errorf("the same owner's second process slept %v before re-entering a lock its owner held", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("second never got it")
	}
}

// releaseToRacers unlocks l, whose waiters are woken by the release, while
// holding name's token row, so that their attempts block on it and then run
// at once: the race of two waiters for one freed lock, made certain.
func releaseToRacers(t *testing.T, srv *testserver.Server, name string, l *dlock.Lease) {
	t.Helper()
	ctx := t.Context()
	time.Sleep(700 * time.Millisecond) // the waiters are waiting, subscribed
	raw, err := pgx.Connect(ctx, testserver.PostgresURL(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM dlock_tokens WHERE name = $1 FOR UPDATE`, name); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil { // notifies the waiters
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // their attempts are blocked on the token row
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// tableMode starts a server and makes table mode's tables in it; it
// returns the server, a table-mode URL of it and a client of that URL.
func tableMode(t *testing.T) (*testserver.Server, string, *dlock.Client) {
	t.Helper()
	srv := testserver.Postgres(t)
	url := testserver.PostgresURL(srv) + "&mode=table"
	c := drivertest.MustOpen(t, url)
	if err := c.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return srv, url, c
}

// raced is the end of one racer's Lock: who raced, when Lock returned, and
// what it returned.
type raced struct {
	who string
	at  time.Time
	l   *dlock.Lease
	err error
}

// lockEach starts a Lock of each mutex, named by who locks it, and returns
// where their ends arrive, in the order they come.
func lockEach(ctx context.Context, ms map[string]*dlock.Mutex) <-chan raced {
	got := make(chan raced, len(ms))
	for who, m := range ms {
		go func() {
			l, err := m.Lock(ctx)
			got <- raced{who, time.Now(), l, err}
		}()
	}
	return got
}
