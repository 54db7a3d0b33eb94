package core

import (
	"context"
	"errors"
	"time"

	"github.com/dlock/dlock/driver"
)

// Campaign is the acquire path for a driver's native election: it runs
// campaign (the driver's Campaign with the candidate's value) until it is
// granted, ctx ends or the engine closes; the hold it gets is registered,
// renewed and released as a lock's. alloc is Acquire's.
func (e *Engine) Campaign(ctx context.Context, name string, o Opts, campaign func(ctx context.Context, req driver.Request) (driver.Grant, error), alloc func() *Lease) (*Lease, error) {
	if err := e.beginAcquire(); err != nil {
		return nil, err
	}
	defer e.endAcquire()
	owner := newOwnerID()
	k := holdKey{name: name, owner: owner, kind: driver.Exclusive}
	ent, err := e.enter(ctx, k, false)
	if err != nil {
		return nil, gaveUp(ctx, err)
	}
	defer ent.Done()
	label := o.Label
	if label == "" {
		label = e.cfg.Label
	}
	req := driver.Request{Name: name, Owner: owner, Label: label, TTL: o.TTL, Kind: driver.Exclusive, Wait: e.caps.Blocking}
	wctx, b := e.bindClose(ctx)
	defer e.unbind(b)
	ent.Block(true)
	defer ent.Block(false)
	began := time.Now()
	pause := ErrWait
	for {
		sent := time.Now()
		g, err := campaign(wctx, req)
		if err == nil && g.Acquired {
			l, err := e.grant(ctx, k, req, g, sent, !o.NoRenewal, true, alloc)
			if errors.Is(err, errStaleGrant) {
				continue
			}
			if err == nil {
				e.obs.Acquired(ctx, l.h, time.Since(began))
			}
			return l, err
		}
		if err != nil && (permanent(err) || wctx.Err() != nil) {
			return nil, gaveUp(ctx, e.waitErr(wctx, err))
		}
		if err != nil {
			e.log.Debug("dlock: campaign failed while waiting", "backend", e.cfg.Scheme, "name", name, "err", err)
		} else {
			pause = ErrWait // not the leader yet, without an error: poll
		}
		select {
		case <-time.After(jitter(pause)):
		case <-wctx.Done():
			return nil, gaveUp(ctx, e.waitErr(wctx, err))
		}
		pause = min(pause*2, PollMax)
	}
}

// NewOwnerID is dlock.NewOwnerID: 128 bits from crypto/rand, in hex.
func NewOwnerID() string { return newOwnerID() }
