package natslock

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/nats-io/nats.go"
)

// newTestDriver opens a driver on a server of its own.
func newTestDriver(t *testing.T, ctx context.Context) *natsDriver {
	t.Helper()
	nc, err := nats.Connect(testserver.NATSInProcess(t))
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDriver(ctx, nc, Options{Bucket: "tok", CloseConn: true})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// queued is a waiter whose queue key is written, as acquireWait leaves it.
type queued struct {
	r   driver.Request
	h   *hold
	key string
}

// waiter returns a queued waiter of owner for name.
func waiter(t *testing.T, ctx context.Context, d *natsDriver, name, owner string) queued {
	t.Helper()
	r := driver.Request{Name: name, Owner: owner, TTL: 30 * time.Second, Wait: true}
	h := &hold{key: key(name), val: value{Owner: owner, ID: newID(), TTL: r.TTL.Milliseconds()}}
	qkey := queuePrefix(name) + h.val.ID
	b, _ := json.Marshal(h.val)
	if _, err := d.putTTL(ctx, qkey, b, r.TTL); err != nil {
		t.Fatal(err)
	}
	return queued{r: r, h: h, key: qkey}
}

// step takes q's next step of its wait on d: the first flags the holder's
// key.
func (q queued) step(ctx context.Context, d *natsDriver) (driver.Grant, error) {
	g, _, err := d.step(ctx, q.r, q.h, q.key)
	return g, err
}

// flaggedHold has owner a take name on d, then waiter b take its first
// step, which flags a's key. It returns a's request and grant, and b.
func flaggedHold(t *testing.T, ctx context.Context, d *natsDriver, name string) (driver.Request, driver.Grant, queued) {
	t.Helper()
	r := driver.Request{Name: name, Owner: "a", TTL: 30 * time.Second}
	g, err := d.Acquire(ctx, r)
	if err != nil || !g.Acquired {
		t.Fatalf("Acquire: %+v, %v", g, err)
	}
	b := waiter(t, ctx, d, name, "b")
	if _, err := b.step(ctx, d); err != nil { // flags a's key
		t.Fatal(err)
	}
	return r, g, b
}

// A release without a handle (dlock's undo of an attempt whose reply was
// lost: it names the owner and the token Inspect reported) finds its hold
// after a waiter flagged the key, and releases it, rather than refuse it as
// lost and leave it held to its TTL.
func TestReleaseWithoutHandleAfterFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	r, g, _ := flaggedHold(t, ctx, d, "undo")
	if info, err := d.Inspect(ctx, "undo"); err != nil || info.Token != g.Token {
		t.Errorf("Inspect after the flag: %+v, %v; want token %d", info, err, g.Token)
	}
	if err := d.Release(ctx, driver.Held{Name: "undo", Owner: "a", TTL: r.TTL, Token: g.Token}, 1); err != nil {
		t.Fatalf("Release without a handle: %v", err)
	}
	if info, err := d.Inspect(ctx, "undo"); err != nil || info.Owner == "a" {
		t.Errorf("Inspect after the release: %+v, %v; want a's hold gone", info, err)
	}
}

// A waiter handed the lock takes the handover's revision as its token even
// if another waiter flagged the key before it confirmed: every reader, and
// the new holder, agree on the token.
func TestHandoverTokenSurvivesFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d := newTestDriver(t, ctx)
	r, ga, b := flaggedHold(t, ctx, d, "ho")
	if err := d.Release(ctx, driver.Held{Name: "ho", Owner: "a", TTL: r.TTL, Token: ga.Token, Handle: ga.Handle}, 1); err != nil {
		t.Fatal(err)
	}
	e, err := d.kv.Get(ctx, key("ho"))
	if err != nil {
		t.Fatal(err)
	}
	handover := e.Revision()
	if v := decode(t, e.Value()); v.ID != b.h.val.ID {
		t.Fatalf("after a's release the key holds %+v; want b's hold", v)
	}
	if _, err := waiter(t, ctx, d, "ho", "c").step(ctx, d); err != nil { // c flags b's key before b confirms
		t.Fatal(err)
	}
	if info, err := d.Inspect(ctx, "ho"); err != nil || info.Token != handover {
		t.Errorf("Inspect with c queued: %+v, %v; want the handover's token %d", info, err, handover)
	}
	gb, err := b.step(ctx, d) // b confirms
	if err != nil || !gb.Acquired {
		t.Fatalf("b's confirm: %+v, %v", gb, err)
	}
	if gb.Token != handover || gb.Token <= ga.Token {
		t.Errorf("b's token %d; want the handover's %d (a's was %d)", gb.Token, handover, ga.Token)
	}
	var l *Lease
	if !gb.Handle.(*hold).As(&l) || l.Token != gb.Token {
		t.Errorf("b's Lease: %+v; want token %d", l, gb.Token)
	}
	if info, err := d.Inspect(ctx, "ho"); err != nil || info.Token != gb.Token {
		t.Errorf("Inspect after b's confirm: %+v, %v; want token %d", info, err, gb.Token)
	}
}

func decode(t *testing.T, b []byte) value {
	t.Helper()
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
