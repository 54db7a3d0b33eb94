package natslock

// The lock path: a grant by create-if-absent, renewal by a compare-and-set
// write that carries the TTL again, release by expected revision.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fresh checks a new grant's token against the bucket's history: see
// "Fencing tokens" in the package doc.
func (d *natsDriver) fresh(ctx context.Context, tok uint64) error {
	d.mu.Lock()
	check := d.recheck || tok <= d.maxToken
	d.mu.Unlock()
	if check {
		if err := d.checkBucket(ctx); err != nil {
			return err
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stale {
		return fmt.Errorf("natslock: %w: bucket %q was deleted and created again: its tokens started over; open the client again",
			dlock.ErrInvalidConfig, d.bucket)
	}
	d.maxToken = max(d.maxToken, tok)
	return nil
}

func (d *natsDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, fmt.Errorf("natslock: %w: %s", dlock.ErrUnsupported, kindsNote)
	}
	if d.closed() {
		return driver.Grant{}, fmt.Errorf("natslock: acquire %q: %w", r.Name, dlock.ErrClosed)
	}
	ctx, cancel := d.bind(ctx)
	defer cancel()
	h := &hold{key: key(r.Name), val: value{Owner: r.Owner, Label: r.Label, ID: newID(), TTL: r.TTL.Milliseconds()}}
	var g driver.Grant
	var err error
	if r.Wait {
		g, err = d.acquireWait(ctx, r, h) // queue.go
	} else {
		g, err = d.tryCreate(ctx, r, h)
	}
	return g, d.closedErr(err)
}

// tryCreate makes one attempt: create the lock's key if absent.
func (d *natsDriver) tryCreate(ctx context.Context, r driver.Request, h *hold) (driver.Grant, error) {
	return d.createKey(ctx, r, h, true)
}

// createKey is tryCreate. Without undo, a create that failed uncertainly is
// left as it is: a queued wait's next step finds the key under h's id if it
// landed and confirms it as its grant, and its leave releases it; an undo
// there, with a bound of its own, made a wait whose ctx ended return 4 s
// late on a silent link, not 2 (an adversary pass).
func (d *natsDriver) createKey(ctx context.Context, r driver.Request, h *hold, undo bool) (driver.Grant, error) {
	b, _ := json.Marshal(h.val)
	rev, err := d.kv.Create(ctx, h.key, b, jetstream.KeyTTL(r.TTL))
	if errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() != nil {
		// nats.go's Create of a key that keeps a purge marker reads the
		// marker after its first write is refused, and a deadline in that
		// read comes back as the refusal, ErrKeyExists: not an answer
		// that the key is held (an adversary pass).
		err = ctx.Err()
	}
	switch {
	case errors.Is(err, jetstream.ErrKeyExists):
		g := driver.Grant{}
		if e, err := d.kv.Get(ctx, h.key); err == nil {
			var v value
			if json.Unmarshal(e.Value(), &v) == nil {
				g.Retry = max(time.Until(e.Created().Add(time.Duration(v.TTL)*time.Millisecond)), 0)
			}
		}
		return g, nil
	case err != nil:
		if undo {
			d.undo(ctx, r, h)
		}
		return driver.Grant{}, fmt.Errorf("natslock: acquire %q: %w", r.Name, d.noteErr(err))
	}
	if err := d.fresh(ctx, rev); err != nil {
		h.rev = rev
		d.giveBack(ctx, r, h)
		return driver.Grant{}, err
	}
	return d.granted(h, rev), nil
}

func (d *natsDriver) granted(h *hold, rev uint64) driver.Grant {
	h.rev, h.val.Token = rev, rev
	return driver.Grant{Acquired: true, Token: rev, Holds: 1, Handle: h}
}

// undo removes h's key if a create that failed (a deadline, a lost reply)
// wrote it after all. A read alone could pass the create in the server, so
// it first sends a second create on the same connection: the stream
// handles the two in order, so once the second is answered the first has
// been stored or refused.
func (d *natsDriver) undo(ctx context.Context, r driver.Request, h *hold) {
	ctx, cancel := d.detached(ctx, attemptTimeout)
	defer cancel()
	b, _ := json.Marshal(h.val)
	rev, err := d.kv.Create(ctx, h.key, b, jetstream.KeyTTL(time.Duration(h.val.TTL)*time.Millisecond))
	if errors.Is(err, jetstream.ErrKeyExists) {
		h.rev = 0
		rev, err = d.ownRevision(ctx, h)
	}
	if err == nil {
		h.rev = rev
		d.giveBack(ctx, r, h)
	}
}

// giveBack releases h, whose key a create wrote at h.rev but whose grant
// is not returned (undo; a grant the bucket check refused), as Release
// does: a waiter may flag the key (a new revision) at any moment, and a
// purge at h.rev alone would then be refused and leave the key held, by a
// hold nobody has, to its TTL.
func (d *natsDriver) giveBack(ctx context.Context, r driver.Request, h *hold) {
	ctx, cancel := d.detached(ctx, attemptTimeout)
	defer cancel()
	_ = d.Release(ctx, driver.Held{Name: r.Name, Owner: r.Owner, TTL: r.TTL, Handle: h}, 1)
}

// write rewrites h's key with its TTL, expecting the revision h last wrote;
// if that fails, it reads the key and, if the hold id is still h's (a
// reply lost), writes again at the key's revision.
func (d *natsDriver) write(ctx context.Context, h *hold, ttl time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The value says the TTL its write carries: a waiter's flag keeps the
	// key's life from it, and Inspect shows it. An Extend writes a TTL
	// other than the grant's; a flag that read the grant's cut the key's
	// life short under a holder that does not renew (an adversary pass:
	// two holders at once).
	h.val.TTL = ttl.Milliseconds()
	for range 2 {
		b, _ := json.Marshal(h.val)
		pa, err := d.js.PublishMsg(ctx, &nats.Msg{Subject: "$KV." + d.bucket + "." + h.key, Data: b},
			jetstream.WithExpectLastSequencePerSubject(h.rev), jetstream.WithMsgTTL(ttl))
		if err == nil {
			h.rev = pa.Sequence
			return nil
		}
		if !wrongRevision(err) {
			return d.noteErr(err)
		}
		rev, err := d.ownRevision(ctx, h)
		if err != nil {
			return err
		}
		h.rev = rev
	}
	return fmt.Errorf("%w: the key changed while it was renewed", dlock.ErrLeaseLost)
}

// ownRevision returns the key's revision if it still holds h's hold id.
func (d *natsDriver) ownRevision(ctx context.Context, h *hold) (uint64, error) {
	e, err := d.kv.Get(ctx, h.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return 0, fmt.Errorf("%w: the key is gone", dlock.ErrLeaseLost)
	}
	if err != nil {
		return 0, d.noteErr(err)
	}
	var v value
	if json.Unmarshal(e.Value(), &v) != nil || v.ID != h.val.ID {
		return 0, fmt.Errorf("%w: the key belongs to another hold", dlock.ErrLeaseLost)
	}
	h.val.W = v.W // a waiter flagged itself: keep the flag
	return e.Revision(), nil
}

func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Renew rewrites each held key with its TTL, one compare-and-set each.
func (d *natsDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	ctx, cancel := d.bind(ctx)
	defer cancel()
	for i, hd := range batch {
		h, ok := hd.Handle.(*hold)
		if !ok {
			res[i].Err = fmt.Errorf("natslock: renew %q: %w", hd.Name, dlock.ErrLeaseLost)
			continue
		}
		if d.closed() {
			res[i].Err = fmt.Errorf("natslock: renew %q: %w", hd.Name, dlock.ErrClosed)
		} else if err := d.write(ctx, h, hd.TTL); err != nil {
			res[i].Err = fmt.Errorf("natslock: renew %q: %w", hd.Name, d.closedErr(err))
		}
	}
	return res
}

// Release purges the holder's key, expecting the revision the hold last
// wrote. Without a handle (a hold dlock found after a lost reply), it
// purges the key if it holds the owner and token.
func (d *natsDriver) Release(ctx context.Context, hd driver.Held, _ int) error {
	if d.closed() {
		return fmt.Errorf("natslock: release %q: %w", hd.Name, dlock.ErrClosed)
	}
	// Retried for at most the TTL (a leader election, a reconnect): past
	// it the key has expired anyway.
	ctx, cancel := d.bindTimeout(ctx, hd.TTL)
	defer cancel()
	h, ok := hd.Handle.(*hold)
	if !ok {
		e, err := d.kv.Get(ctx, key(hd.Name))
		if err != nil {
			if err = d.closedErr(err); errors.Is(err, dlock.ErrClosed) {
				return fmt.Errorf("natslock: release %q: %w", hd.Name, err)
			}
			return fmt.Errorf("natslock: release %q: %w", hd.Name, dlock.ErrLeaseLost)
		}
		var v value
		if json.Unmarshal(e.Value(), &v) != nil || v.Owner != hd.Owner || tokenOf(e, v) != hd.Token {
			return fmt.Errorf("natslock: release %q: %w", hd.Name, dlock.ErrLeaseLost)
		}
		h = &hold{key: e.Key(), rev: e.Revision(), val: v}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	uncertain, conflicts, pause := false, 0, 50*time.Millisecond
	for {
		var err error
		if h.val.W {
			err = d.handOver(ctx, hd.Name, h)
		} else {
			err = d.kv.Purge(ctx, h.key, jetstream.LastRevision(h.rev), jetstream.PurgeTTL(markerTTL))
		}
		if err == nil {
			return nil
		}
		if err := d.closedErr(err); errors.Is(err, dlock.ErrClosed) {
			return fmt.Errorf("natslock: release %q: %w", hd.Name, err) // no store left to try again on
		}
		if !wrongRevision(err) && !errors.Is(err, jetstream.ErrKeyExists) {
			// Uncertain: it may have been applied. Try again after a pause.
			uncertain = true
			select {
			case <-ctx.Done():
				return fmt.Errorf("natslock: release %q: %w", hd.Name, d.noteErr(err))
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
			continue
		}
		rev, err := d.ownRevision(ctx, h)
		if err != nil {
			if uncertain && errors.Is(err, dlock.ErrLeaseLost) {
				return nil // gone or handed over: most likely by our own earlier attempt
			}
			return fmt.Errorf("natslock: release %q: %w", hd.Name, d.closedErr(err))
		}
		h.rev = rev
		if conflicts++; conflicts > 10 { // each waiter flags the key once
			return fmt.Errorf("natslock: release %q: the key kept changing", hd.Name)
		}
	}
}

// tokenOf is the token of the hold e shows: the one it stores, or, where
// none is stored yet, e's revision. Only the granting write (a create, a
// handover) leaves the token unstored; every later write of the key (the
// holder's renewals, a waiter's flag) stores it, so the token a hold is
// read with never changes.
func tokenOf(e jetstream.KeyValueEntry, v value) uint64 {
	if v.Token != 0 {
		return v.Token
	}
	return e.Revision()
}
