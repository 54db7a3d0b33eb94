package natslock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The queue: a waiter puts a key of its own, "q.<name>.<hold id>", under
// its own TTL (kept alive while it waits), and flags the lock's key (W) so
// that its holder's release hands the key over instead of purging it: the
// release rewrites it, at the holder's revision, with the value of the
// waiter whose queue key has the lowest revision. That write's revision is
// the new holder's token. Every waiter watches the lock's key, but only
// the one named by a handover acts on it (one read-free wake-up per
// release); when the key is removed (an expiry, a force release, a purge
// that raced a waiter's flag), the waiter at the head of the queue creates
// it.

// attemptTimeout bounds each store call of a wait.
const attemptTimeout = 2 * time.Second

func queuePrefix(name string) string {
	return "q." + base64.RawURLEncoding.EncodeToString([]byte(name)) + "."
}

// acquireWait queues h and waits until it holds the lock or ctx ends; a
// wait that ends without a grant leaves nothing behind.
func (d *natsDriver) acquireWait(ctx context.Context, r driver.Request, h *hold) (driver.Grant, error) {
	if g, err := d.tryCreate(ctx, r, h); err != nil || g.Acquired {
		return g, err
	}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	w, err := d.kv.Watch(wctx, h.key, jetstream.UpdatesOnly())
	if err != nil {
		return driver.Grant{}, fmt.Errorf("natslock: watch %q: %w", r.Name, d.noteErr(err))
	}
	defer func() { _ = w.Stop() }()
	qkey := queuePrefix(r.Name) + h.val.ID
	qv := h.val
	qval, _ := json.Marshal(qv)
	qrev, err := d.putTTL(ctx, qkey, qval, r.TTL)
	if err != nil {
		d.leaveQueue(ctx, r, h, qkey)
		return driver.Grant{}, fmt.Errorf("natslock: queue %q: %w", r.Name, d.noteErr(err))
	}
	// Keepalives rewrite the key (a new revision): its place is the first.
	qv.Q = qrev
	qval, _ = json.Marshal(qv)
	tick := time.NewTicker(r.TTL / 3)
	defer tick.Stop()
	for {
		// Each attempt is bounded: a watch or a read lost with a restarted
		// server must not stall the wait; the tick tries again.
		sctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		g, err := d.step(sctx, r, h, qkey)
		cancel()
		if err == nil && g.Acquired {
			d.dropQueueKey(ctx, qkey)
			return g, nil
		}
		if err != nil && ctx.Err() == nil {
			// Uncertain; try again after the next event or tick.
			driver.Logger(ctx).Debug("natslock: wait step", "name", r.Name, "err", err)
		}
	wait:
		select {
		case e, ok := <-w.Updates():
			if !ok {
				d.leaveQueue(ctx, r, h, qkey)
				if d.closed() {
					return driver.Grant{}, fmt.Errorf("natslock: wait %q: %w", r.Name, dlock.ErrClosed)
				}
				return driver.Grant{}, fmt.Errorf("natslock: wait %q: the watch ended", r.Name)
			}
			if e == nil {
				goto wait
			}
			if e.Operation() == jetstream.KeyValuePut {
				var v value
				if json.Unmarshal(e.Value(), &v) != nil || v.ID != h.val.ID {
					goto wait // another holder, or a flag: not for us
				}
			}
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, attemptTimeout)
			_, err := d.putTTL(pctx, qkey, qval, r.TTL)
			cancel()
			if err != nil && ctx.Err() == nil {
				driver.Logger(ctx).Debug("natslock: queue keepalive", "name", r.Name, "err", err)
			}
		case <-ctx.Done():
			d.leaveQueue(ctx, r, h, qkey)
			if d.closed() {
				return driver.Grant{}, fmt.Errorf("natslock: wait %q: %w", r.Name, dlock.ErrClosed)
			}
			return driver.Grant{}, ctx.Err()
		}
	}
}

// step reads the lock's key once and acts: confirm a handover to h, take
// a free lock if h heads the queue, or flag the holder's key.
func (d *natsDriver) step(ctx context.Context, r driver.Request, h *hold, qkey string) (driver.Grant, error) {
	e, err := d.kv.Get(ctx, h.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		head, others, err := d.queueHead(ctx, r.Name)
		if err != nil || head != qkey {
			return driver.Grant{}, err
		}
		h.val.W = others
		defer func() { h.val.W = false }()
		sent := time.Now()
		g, err := d.tryCreate(ctx, r, h)
		g.Since = sent // counted from the create, not from the wait's start
		return g, err
	case err != nil:
		return driver.Grant{}, err
	}
	var v value
	if json.Unmarshal(e.Value(), &v) != nil {
		return driver.Grant{}, fmt.Errorf("natslock: %q does not hold a dlock value", r.Name)
	}
	if v.ID == h.val.ID { // handed over: confirm with a write of our own TTL
		// The handover's revision is the token: the key's, or the one a
		// waiter's flag stored when it rewrote the key.
		tok := tokenOf(e, v)
		h.rev, h.val.W, h.val.Token = e.Revision(), v.W, tok
		sent := time.Now()
		if err := d.write(ctx, h, r.TTL); err != nil {
			return driver.Grant{}, err
		}
		if err := d.fresh(ctx, tok); err != nil {
			return driver.Grant{}, err
		}
		return driver.Grant{Acquired: true, Token: tok, Holds: 1, Handle: h, Since: sent}, nil
	}
	if v.W {
		return driver.Grant{}, nil
	}
	if time.Until(expiry(e, v)) < time.Second {
		return driver.Grant{}, nil // about to expire: its marker wakes us
	}
	v.W = true
	err = d.rewrite(ctx, h.key, e, v)
	if wrongRevision(err) {
		err = nil // it changed meanwhile: the watch tells
	}
	return driver.Grant{}, err
}

// rewrite writes v, a waiter's change of the value e shows (a flag, or
// none: a fence), to the lock's key at e's revision. It is a new revision
// of the holder's key, so it stores the holder's token (the grant's
// revision, which a create or a handover could not write), so that every
// reader keeps seeing the holder's own, and keeps the key's expiry, within
// a second (the TTL unit, rounded up), so that waiters that rewrite the key
// do not keep it past its holder's TTL.
func (d *natsDriver) rewrite(ctx context.Context, k string, e jetstream.KeyValueEntry, v value) error {
	exp := expiry(e, v)
	v.Token, v.EX = tokenOf(e, v), exp.UnixMilli()
	b, _ := json.Marshal(v)
	ttl := max(time.Until(exp).Truncate(time.Second)+time.Second, time.Second)
	_, err := d.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + k, Data: b},
		jetstream.WithExpectLastSequencePerSubject(e.Revision()), jetstream.WithMsgTTL(ttl))
	return err
}

// queueHead returns the queue key of name with the lowest revision, and
// whether others wait behind it.
func (d *natsDriver) queueHead(ctx context.Context, name string) (string, bool, error) {
	head, n, err := d.queue(ctx, name)
	return head, n > 1, err
}

// queue returns the queue key of name with the lowest revision and the
// number of queued waiters.
func (d *natsDriver) queue(ctx context.Context, name string) (string, int, error) {
	// Bounded: a watch whose consumer lost its state (a restarted server)
	// may never send the end of its initial values.
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	w, err := d.kv.Watch(ctx, queuePrefix(name)+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = w.Stop() }()
	head, place, n := "", uint64(0), 0
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return head, n, nil
			}
			var v value
			if json.Unmarshal(e.Value(), &v) != nil {
				continue
			}
			// A key not rewritten within its TTL is a waiter gone (its TTL
			// should have removed it): skip it, and remove it.
			if time.Since(e.Created()) > time.Duration(v.TTL)*time.Millisecond+time.Second {
				_ = d.kv.Purge(ctx, e.Key(), jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(markerTTL))
				continue
			}
			p := v.Q
			if p == 0 {
				p = e.Revision()
			}
			n++
			if head == "" || p < place {
				head, place = e.Key(), p
			}
		case <-ctx.Done():
			return "", 0, ctx.Err()
		}
	}
}

// handOver rewrites the lock's key, at h's revision, as held by the head
// of the queue, or purges it if the queue is empty.
func (d *natsDriver) handOver(ctx context.Context, name string, h *hold) error {
	v, ok, err := d.nextHolder(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return d.kv.Purge(ctx, h.key, jetstream.LastRevision(h.rev), jetstream.PurgeTTL(markerTTL))
	}
	return d.handTo(ctx, h, v)
}

// nextHolder reads the queue of name for a handover: the value the head
// of the queue is to hold the lock's key with, or false if the lock is
// to be freed instead.
func (d *natsDriver) nextHolder(ctx context.Context, name string) (value, bool, error) {
	head, others, err := d.queueHead(ctx, name)
	if err != nil || head == "" {
		// No queue to read (a consumer cannot be made, as for a while after a
		// leader change): free the lock; the waiters wake on the purge and
		// the head of the queue takes it.
		return value{}, false, nil
	}
	e, err := d.kv.Get(ctx, head)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		// It left meanwhile: free the lock; the others wake on the purge.
		return value{}, false, nil
	}
	if err != nil {
		return value{}, false, err
	}
	var v value
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return value{}, false, err
	}
	v.W, v.Token = others, 0
	return v, true, nil
}

// handTo rewrites the lock's key, at h's revision, as held by v (from
// nextHolder).
func (d *natsDriver) handTo(ctx context.Context, h *hold, v value) error {
	b, _ := json.Marshal(v)
	_, err := d.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + h.key, Data: b},
		jetstream.WithExpectLastSequencePerSubject(h.rev), jetstream.WithMsgTTL(time.Duration(v.TTL)*time.Millisecond))
	return err
}

// putTTL writes key with its own TTL, whatever it held, and returns the
// write's revision.
func (d *natsDriver) putTTL(ctx context.Context, key string, val []byte, ttl time.Duration) (uint64, error) {
	pa, err := d.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + key, Data: val}, jetstream.WithMsgTTL(ttl))
	if err != nil {
		return 0, err
	}
	return pa.Sequence, nil
}

func (d *natsDriver) dropQueueKey(ctx context.Context, qkey string) {
	ctx, cancel := d.detached(ctx, attemptTimeout)
	defer cancel()
	_ = d.kv.Purge(ctx, qkey, jetstream.PurgeTTL(markerTTL))
}

// leaveQueue gives up a wait: the queue key goes and, if the lock was
// handed to h meanwhile, it is released (to the next waiter).
//
// A handover to h may still be on its way: its holder's release read the
// queue before h's queue key went, and writes the lock's key, at the
// revision it holds, after h read it. So when the key is another hold's,
// h fences it: it rewrites the key unchanged at the revision it read
// (keeping its expiry, see rewrite). Either the fence comes first, and the
// handover is refused on the revision (its holder reads the key and the
// queue again, without h), or the handover comes first, the fence is
// refused, and h reads the key again and finds it its own.
func (d *natsDriver) leaveQueue(ctx context.Context, r driver.Request, h *hold, qkey string) {
	d.dropQueueKey(ctx, qkey)
	ctx, cancel := d.detached(ctx, attemptTimeout)
	defer cancel()
	for range 10 { // each try is refused only by another write of the key
		e, err := d.kv.Get(ctx, h.key)
		if err != nil {
			return // gone (a handover at its old revision cannot land), or no store
		}
		var v value
		if json.Unmarshal(e.Value(), &v) != nil {
			return
		}
		if v.ID == h.val.ID {
			h.rev, h.val.W = e.Revision(), v.W
			_ = d.Release(ctx, driver.Held{Name: r.Name, Owner: r.Owner, TTL: r.TTL, Handle: h}, 1)
			return
		}
		if err := d.rewrite(ctx, h.key, e, v); !wrongRevision(err) {
			return
		}
	}
}
