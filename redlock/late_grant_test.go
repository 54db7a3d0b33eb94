package redlock_test

import (
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/redlock"
	"github.com/redis/go-redis/v9"
)

// silencedNode4 opens a Redlock client of addrs whose node 4 alone talks
// through sil (undo_test.go's silencer: while armed, a script call reaches
// the node and runs, and its reply is lost: the client sees a timeout).
func silencedNode4(t *testing.T, addrs []string, sil *silencer) *dlock.Client {
	t.Helper()
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		o := &redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1}
		if i == 4 {
			o.Dialer = sil.dial
		}
		clients[i] = redis.NewClient(o)
	}
	c, err := redlock.Open(t.Context(), clients, redlock.Options{CloseClients: true, NodeTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The owner holds T1 on every node; node 4 loses the key (a restart
// without persistence, or its copy expired). A nested Lock re-enters T1 on
// nodes 0-3 (a quorum) and succeeds; on node 4 its attempt runs (a new
// hold under the attempt's token) but the reply is lost. Acquire once
// undid only nodes that answered under another token, so after every
// lease was unlocked node 4 still counted a hold of the owner. Now it
// cancels its request on every node that did not answer.
func TestLateGrantAfterSuccessIsUndone(t *testing.T) {
	_, addrs := fiveNodes(t)
	raw := rawClients(t, addrs)
	sil := &silencer{}
	c := silencedNode4(t, addrs, sil)
	ctx := t.Context()
	const name = "late-success"
	owner := dlock.NewOwnerID()
	m := c.Mutex(name, dlock.WithTTL(10*time.Second), dlock.WithOwner(owner))
	outer, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw[4].Del(ctx, "dlock:{"+name+"}").Err(); err != nil {
		t.Fatal(err)
	}
	sil.armed.Store(true)
	nested, err := m.Lock(dlock.ContextWithLease(ctx, outer))
	sil.armed.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outer token %d, nested token %d; holds now %v", outer.Token(), nested.Token(), holdsOf(t, raw, name, owner))
	if err := nested.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h := holdsOf(t, raw, name, owner)
	pt, _ := raw[4].PTTL(ctx, "dlock:{"+name+"}").Result()
	t.Logf("after every lease unlocked: holds %v (node 4 pttl %v)", h, pt)
	if h[0]+h[1]+h[2]+h[3]+h[4] != 0 {
		t.Errorf("after every lease is unlocked the nodes count holds %v for the owner; want none", h)
	}
}

// Nodes 0 and 1 are held by another owner X (O's copies there expired and
// X took them: X has no quorum either); O holds T1 on nodes 2, 3 and 4. A
// TryLock of O from a second client of the same owner re-enters T1 on 2
// and 3 (no quorum), and on node 4 re-enters T1 too, but the reply is lost.
// The failed attempt's undo once released, on node 4, the attempt's new
// token, which the node refused: node 4 kept the re-entry's count. Now it
// cancels its request there, which gives back what the request did.
func TestLateReentryAfterFailureIsUndone(t *testing.T) {
	_, addrs := fiveNodes(t)
	raw := rawClients(t, addrs)
	sil := &silencer{}
	a := silencedNode4(t, addrs, sil)
	c := silencedNode4(t, addrs, sil)
	ctx := t.Context()
	const name = "late-failure"
	owner := dlock.NewOwnerID()
	l, err := a.Mutex(name, dlock.WithTTL(10*time.Second), dlock.WithOwner(owner)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := "dlock:{" + name + "}"
	for _, i := range []int{0, 1} {
		raw[i].Del(ctx, k)
		raw[i].HSet(ctx, k, "xowner", 1, "\x00t", 99)
		raw[i].PExpire(ctx, k, 10*time.Second)
	}
	before := holdsOf(t, raw, name, owner)
	sil.armed.Store(true)
	_, terr := c.Mutex(name, dlock.WithTTL(10*time.Second), dlock.WithOwner(owner)).TryLock(ctx)
	sil.armed.Store(false)
	after := holdsOf(t, raw, name, owner)
	t.Logf("O's holds before %v; after the failed attempt (%v): %v", before, terr, after)
	if after != nil && (after[2] != before[2] || after[3] != before[3] || after[4] != before[4]) {
		t.Errorf("a failed attempt left counts: before %v, after %v", before, after)
	}
	uerr := l.Unlock(ctx)
	h := holdsOf(t, raw, name, owner)
	t.Logf("after O's only lease is unlocked (%v): holds %v", uerr, h)
	if h[2]+h[3]+h[4] != 0 {
		t.Errorf("after every lease is unlocked the nodes count holds %v for the owner; want none", h)
	}
}

func rawClients(t *testing.T, addrs []string) []*redis.Client {
	var raw []*redis.Client
	for _, a := range addrs {
		r := redis.NewClient(&redis.Options{Addr: a})
		t.Cleanup(func() { _ = r.Close() })
		raw = append(raw, r)
	}
	return raw
}
