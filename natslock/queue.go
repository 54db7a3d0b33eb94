package natslock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
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
	defer stopWatch(w)
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
	stopKeep := d.keepQueued(ctx, r, qkey, qval)
	defer stopKeep()
	tick := time.NewTicker(r.TTL / 3) // a step again, after an error
	defer tick.Stop()
	stopAhead := func() {} // ends the watch of the waiter ahead (below)
	defer func() { stopAhead() }()
	for {
		// Each of the step's store calls is bounded (see step): a watch or
		// a read lost with a restarted server must not stall the wait; the
		// tick tries again.
		g, ahead, err := d.step(ctx, r, h, qkey)
		if err == nil && g.Acquired {
			stopKeep()
			d.dropQueueKey(ctx, qkey)
			return g, nil
		}
		if err != nil && ctx.Err() == nil {
			// Uncertain; try again after the next event or tick.
			driver.Logger(ctx).Debug("natslock: wait step", "name", r.Name, "err", err)
		}
		stopAhead()
		// The waiter ahead takes the free lock, unless it died or left: the
		// end of its place (its TTL, or the purge of a wait given up)
		// writes nothing to the lock's key, which is all w watches. So
		// its queue key is watched too, and as a backstop the wait steps
		// again when that key would be skipped as gone (see step).
		var again <-chan time.Time
		var aheadC <-chan jetstream.KeyValueEntry
		if ahead != "" {
			again = time.After(g.Retry)
			aheadC, stopAhead = d.watchAhead(ctx, ahead)
		}
		there := false // the waiter ahead's key was there when its watch began
	wait:
		select {
		case <-again:
		case e, ok := <-aheadC:
			switch {
			case ok && e == nil && there: // the end of its current value: wait on
				goto wait
			case ok && e != nil && e.Operation() == jetstream.KeyValuePut:
				there = true
				goto wait // there, or rewritten by its keepalive: it takes the lock
			}
			// Gone (deleted, purged, expired, or absent when the watch
			// began), or the watch ended: step again.
		case e, ok := <-w.Updates():
			if !ok {
				stopKeep()
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
		case <-ctx.Done():
			stopKeep()
			d.leaveQueue(ctx, r, h, qkey)
			if d.closed() {
				return driver.Grant{}, fmt.Errorf("natslock: wait %q: %w", r.Name, dlock.ErrClosed)
			}
			return driver.Grant{}, ctx.Err()
		}
	}
}

// keepQueued rewrites the waiter's queue key qkey (qval, under r.TTL)
// every TTL/3 until the stop it returns, which returns once no rewrite is
// in flight (one after the wait dropped its key would put it back; a
// rewrite cut short by stop was sent before the drop, on the same
// connection, so the server applies it first). It runs beside the wait's
// steps, whose store calls can take seconds on a slow link: run between
// them, a key under a short TTL ran out mid-step and the waiter behind took
// the head's place (an adversary pass).
func (d *natsDriver) keepQueued(ctx context.Context, r driver.Request, qkey string, qval []byte) func() {
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(r.TTL / 3)
		defer tick.Stop()
		for {
			select {
			case <-kctx.Done():
				return
			case <-tick.C:
			}
			pctx, pcancel := context.WithTimeout(kctx, attemptTimeout)
			_, err := d.putTTL(pctx, qkey, qval, r.TTL)
			pcancel()
			if err != nil && kctx.Err() == nil {
				driver.Logger(ctx).Debug("natslock: queue keepalive", "name", r.Name, "err", err)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// watchAhead watches the queue key of the waiter ahead: its value as it
// stands, then its changes, until stop. The watch's start is bounded by
// attemptTimeout (nothing comes on a watch that could not start in time).
func (d *natsDriver) watchAhead(ctx context.Context, key string) (<-chan jetstream.KeyValueEntry, func()) {
	ctx, cancel := context.WithCancel(ctx)
	late := time.AfterFunc(attemptTimeout, cancel)
	w, err := d.kv.Watch(ctx, key)
	late.Stop()
	if err != nil {
		cancel()
		return nil, func() {}
	}
	return w.Updates(), func() {
		cancel()
		stopWatch(w)
	}
}

// step reads the lock's key once and acts: confirm a handover to h, take
// a free lock if h heads the queue, or flag the holder's key. When the
// lock is free and another waiter heads the queue, it returns that
// waiter's queue key and, as Retry, the time until queue would skip that
// key as gone. Each of its reads and writes is bounded by attemptTimeout
// on its own (queue bounds itself): bounded together, a create on a key
// that keeps a purge marker (three round trips in nats.go) after a read
// and the queue's read did not fit in 2 s over a link of 0.6 s, and the
// head of a free lock never took it (an adversary pass).
func (d *natsDriver) step(ctx context.Context, r driver.Request, h *hold, qkey string) (driver.Grant, string, error) {
	bctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	e, err := d.kv.Get(bctx, h.key)
	cancel()
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		head, others, end, err := d.queueHead(ctx, r.Name)
		if err != nil {
			return driver.Grant{}, "", err
		}
		if head != qkey {
			if head == "" { // not even this waiter's key: its keepalive puts it back
				return driver.Grant{}, "", nil
			}
			return driver.Grant{Retry: max(time.Until(end), 0) + 50*time.Millisecond}, head, nil
		}
		// The hold keeps the flag: its release hands the lock to the next
		// waiter rather than purging it, which would wake every waiter and
		// let a newcomer's create in ahead of them (an adversary pass).
		h.val.W = others
		sent := time.Now()
		bctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		g, err := d.createKey(bctx, r, h, false)
		cancel()
		if !g.Acquired {
			h.val.W = false
		}
		g.Since = sent // counted from the create, not from the wait's start
		return g, "", err
	case err != nil:
		return driver.Grant{}, "", err
	}
	var v value
	if json.Unmarshal(e.Value(), &v) != nil {
		return driver.Grant{}, "", fmt.Errorf("natslock: %q does not hold a dlock value", r.Name)
	}
	if v.ID == h.val.ID { // handed over: confirm with a write of our own TTL
		// The handover's revision is the token: the key's, or the one a
		// waiter's flag stored when it rewrote the key.
		tok := tokenOf(e, v)
		h.rev, h.val.W, h.val.Token = e.Revision(), v.W, tok
		sent := time.Now()
		bctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		if err := d.write(bctx, h, r.TTL); err != nil {
			return driver.Grant{}, "", err
		}
		if err := d.fresh(bctx, tok); err != nil {
			return driver.Grant{}, "", err
		}
		return driver.Grant{Acquired: true, Token: tok, Holds: 1, Handle: h, Since: sent}, "", nil
	}
	if v.W {
		return driver.Grant{}, "", nil
	}
	// The flag is a new revision of the holder's key: it stores the
	// holder's token (the grant's revision, which a create or a handover
	// could not write), so that every reader keeps seeing the holder's own.
	v.W, v.Token = true, tokenOf(e, v)
	b, _ := json.Marshal(v)
	left := time.Until(e.Created().Add(time.Duration(v.TTL) * time.Millisecond))
	if left < time.Second {
		return driver.Grant{}, "", nil // about to expire: its marker wakes us
	}
	bctx, cancel = context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	_, err = d.js.PublishMsg(bctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + h.key, Data: b},
		jetstream.WithExpectLastSequencePerSubject(e.Revision()), jetstream.WithMsgTTL(left.Truncate(time.Second)+time.Second))
	if wrongRevision(err) {
		err = nil // it changed meanwhile: the watch tells
	}
	return driver.Grant{}, "", err
}

// queueHead returns the queue key of name with the lowest revision,
// whether others wait behind it, and when its place ends unless its
// waiter keeps it (queue's end).
func (d *natsDriver) queueHead(ctx context.Context, name string) (string, bool, time.Time, error) {
	head, n, end, err := d.queue(ctx, name)
	return head, n > 1, end, err
}

// queue returns the queue key of name with the lowest revision, the number
// of queued waiters, and when the head's place ends unless its waiter
// rewrites it: queue then skips it as gone (its write's time, its TTL and
// a second).
func (d *natsDriver) queue(ctx context.Context, name string) (string, int, time.Time, error) {
	// Bounded: a watch whose consumer lost its state (a restarted server)
	// may never send the end of its initial values.
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	w, err := d.kv.Watch(ctx, queuePrefix(name)+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return "", 0, time.Time{}, err
	}
	defer stopWatch(w)
	head, place, n, end := "", uint64(0), 0, time.Time{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return head, n, end, nil
			}
			var v value
			if json.Unmarshal(e.Value(), &v) != nil {
				continue
			}
			// A key not rewritten within its TTL is a waiter gone (its TTL
			// should have removed it): skip it, and remove it.
			gone := e.Created().Add(time.Duration(v.TTL)*time.Millisecond + time.Second)
			if time.Now().After(gone) {
				_ = d.kv.Purge(ctx, e.Key(), jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(markerTTL))
				continue
			}
			p := v.Q
			if p == 0 {
				p = e.Revision()
			}
			n++
			if head == "" || p < place {
				head, place, end = e.Key(), p, gone
			}
		case <-ctx.Done():
			return "", 0, time.Time{}, ctx.Err()
		}
	}
}

// handOver rewrites the lock's key, at h's revision, as held by the head
// of the queue, or purges it if the queue is empty.
func (d *natsDriver) handOver(ctx context.Context, name string, h *hold) error {
	n, ok, err := d.nextHolder(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return d.kv.Purge(ctx, h.key, jetstream.LastRevision(h.rev), jetstream.PurgeTTL(markerTTL))
	}
	return d.handOverTo(ctx, name, h, n)
}

// next is the waiter a handover is for: its queue key, and the value the
// lock's key is to hold.
type next struct {
	qkey string
	v    value
}

// nextHolder reads the queue of name for a handover: the waiter at its
// head, or false if the lock is to be freed instead.
func (d *natsDriver) nextHolder(ctx context.Context, name string) (next, bool, error) {
	head, others, _, err := d.queueHead(ctx, name)
	if err != nil || head == "" {
		// No queue to read (a consumer cannot be made, as for a while after a
		// leader change): free the lock; the waiters wake on the purge and
		// the head of the queue takes it.
		return next{}, false, nil
	}
	e, err := d.kv.Get(ctx, head)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		// It left meanwhile: free the lock; the others wake on the purge.
		return next{}, false, nil
	}
	if err != nil {
		return next{}, false, err
	}
	var v value
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return next{}, false, err
	}
	v.W, v.Token = others, 0
	return next{qkey: head, v: v}, true, nil
}

// handOverTo rewrites the lock's key, at h's revision, as held by n, then
// makes sure n has not left meanwhile (takeBack).
func (d *natsDriver) handOverTo(ctx context.Context, name string, h *hold, n next) error {
	if _, err := d.handTo(ctx, h.key, h.rev, n.v); err != nil {
		return err
	}
	d.takeBack(ctx, name, h.key, n)
	return nil
}

// takeBack follows a handover to n that may have come too late: n left
// (its ctx ended) between the queue read and the handover's write. Its
// leave (leaveQueue) drops its queue key, then reads the lock's key, and
// may read it before the handover lands: nobody would then hold the lock
// but the key, until n's TTL. So n's queue key is read again. Still there:
// n has not begun to leave, and when it does it reads the key after the
// handover and hands the lock on itself. Gone: n left, or confirmed (it
// drops its queue key after its confirm, which rewrites the key without
// the handover's mark, H). While the key still shows the handover to n,
// unconfirmed (a waiter's flag keeps the mark), the lock is taken back,
// to the next waiter or freed, at the revision read; each such handover
// is followed the same way.
func (d *natsDriver) takeBack(ctx context.Context, name, k string, n next) {
	for range 10 { // each handover taken back is to a waiter that left for good
		_, err := d.kv.Get(ctx, n.qkey)
		if !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted) {
			return // still queued (or no answer: left to the waiter, or its TTL)
		}
		e, err := d.kv.Get(ctx, k)
		if err != nil {
			return
		}
		var v value
		if json.Unmarshal(e.Value(), &v) != nil || v.ID != n.v.ID || !v.H {
			return // confirmed, given on by n's leave, or gone
		}
		nn, ok, err := d.nextHolder(ctx, name)
		if err != nil {
			return
		}
		if !ok {
			err = d.kv.Purge(ctx, k, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(markerTTL))
		} else if _, err = d.handTo(ctx, k, e.Revision(), nn.v); err == nil {
			n = nn
			continue
		}
		if !wrongRevision(err) {
			return // done (freed), or no answer
		}
		// The key changed since it was read (a flag, n's confirm): read again.
	}
}

// handTo rewrites the lock's key k, at revision rev, as held by v, marked
// as handed over until its waiter confirms, and returns the handover's
// revision.
func (d *natsDriver) handTo(ctx context.Context, k string, rev uint64, v value) (uint64, error) {
	v.H = true
	b, _ := json.Marshal(v)
	pa, err := d.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + k, Data: b},
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(time.Duration(v.TTL)*time.Millisecond))
	if err != nil {
		return 0, err
	}
	return pa.Sequence, nil
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

// stopWatch stops w without waiting for the server: nats.go's Stop asks
// the server to drop the watch's consumer and waits for its answer, up to
// its own 5 s request timeout, whatever the wait's ctx (a wait cut off
// from a silent server returned that much later). The consumer goes by
// itself once its subscription is gone.
func stopWatch(w jetstream.KeyWatcher) {
	go func() { _ = w.Stop() }()
}

// leaveQueue gives up a wait: the queue key goes and then, if the lock was
// handed to h meanwhile, it is released (to the next waiter). The steps
// share one bound: each had its own, and a wait cut off from a silent
// server returned some 9 s after its ctx ended (an adversary pass).
func (d *natsDriver) leaveQueue(ctx context.Context, r driver.Request, h *hold, qkey string) {
	ctx, cancel := d.detached(ctx, attemptTimeout)
	defer cancel()
	_ = d.kv.Purge(ctx, qkey, jetstream.PurgeTTL(markerTTL))
	e, err := d.kv.Get(ctx, h.key)
	if err != nil {
		return
	}
	var v value
	if json.Unmarshal(e.Value(), &v) != nil || v.ID != h.val.ID {
		return
	}
	h.rev, h.val.W = e.Revision(), v.W
	_ = d.Release(ctx, driver.Held{Name: r.Name, Owner: r.Owner, TTL: r.TTL, Handle: h}, 1)
}
