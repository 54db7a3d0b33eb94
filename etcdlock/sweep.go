package etcdlock

import (
	"context"
	"time"

	"github.com/dlock/dlock/internal/turn"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sweepHorizon is how long after a contender's put failed without a
// certain answer the client watches for that put landing late.
const sweepHorizon = time.Minute

// sweepCheckTimeout bounds one check of a swept key once the client's slot
// for the name is taken.
const sweepCheckTimeout = 5 * time.Second

// sweepLatePuts watches key, which a contender for name put under s with
// an attempt that failed without a certain answer (timed out, or its
// connection broke). Such a put may still reach etcd, held in a proxy or a
// dropped connection's buffers, after the contender is done with the name:
// it would create a key under s that no contender owns and that holds the
// lock until the client takes the name again or closes. Until sweepHorizon
// has passed since the last such put (a later one extends it), while s
// lives and the driver is open, each time the key is created under s the
// sweeper takes the client's slot for the name and deletes, under the key's
// create revision, a key still under s: with the slot in hand, none of the
// client's contenders uses it. A read-write lock's or semaphore's key name
// (name "") is never used again once swept (kindkeys.go): any key of it
// under s is nobody's, and is deleted without a slot.
func (d *etcdDriver) sweepLatePuts(s *session, name, key string) {
	until := time.Now().Add(sweepHorizon)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	if sw := d.sweeps[key]; sw != nil {
		sw.until = until
		return
	}
	if d.sweeps == nil {
		d.sweeps = map[string]*sweep{}
	}
	sw := &sweep{s: s, name: name, key: key, until: until}
	d.sweeps[key] = sw
	d.bg.Add(1)
	go d.sweep(sw)
}

// sweep is one key's sweeper (see sweepLatePuts).
type sweep struct {
	s         *session
	name, key string
	until     time.Time // guarded by etcdDriver.mu
}

// over reports, under d.mu, whether sw's horizon has passed, and if so
// ends it: a later uncertain put of the key starts a new sweeper. Else it
// returns how long is left.
func (d *etcdDriver) over(sw *sweep) (bool, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	left := time.Until(sw.until)
	if left > 0 {
		return false, left
	}
	d.end(sw)
	return true, 0
}

// end removes sw from d.sweeps if it is still there; d.mu is held.
func (d *etcdDriver) end(sw *sweep) {
	if d.sweeps[sw.key] == sw {
		delete(d.sweeps, sw.key)
	}
}

func (d *etcdDriver) sweep(sw *sweep) {
	defer d.bg.Done()
	ctx, cancel := context.WithCancel(d.bgCtx)
	defer cancel()
	defer func() {
		d.mu.Lock()
		d.end(sw)
		d.mu.Unlock()
	}()
	go func() {
		select {
		case <-sw.s.lost: // the key, if any, went with the lease
			cancel()
		case <-ctx.Done():
		}
	}()
	horizon := time.NewTimer(sweepHorizon)
	defer horizon.Stop()
	for {
		wctx, wcancel := context.WithCancel(ctx)
		wch := d.cli.Watch(clientv3.WithRequireLeader(wctx), sw.key, clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
		done := d.sweepWatch(ctx, sw, wch, horizon)
		wcancel()
		if done {
			return
		}
		// The watch ended (no leader, compaction) or a check failed: begin
		// again, which checks the key again.
		select {
		case <-time.After(maxRetryPause):
		case <-ctx.Done():
			return
		}
	}
}

// sweepWatch follows one watch of the swept key, checking the key once the
// watch has begun (a put may have landed before) and after each create of
// it under the session. It returns true once the sweep is over (its
// horizon passed, or ctx ended), false if the watch ended or a check
// failed first.
func (d *etcdDriver) sweepWatch(ctx context.Context, sw *sweep, wch clientv3.WatchChan, horizon *time.Timer) bool {
	for {
		select {
		case wr, ok := <-wch:
			if !ok {
				return ctx.Err() != nil
			}
			check := wr.Created
			for _, ev := range wr.Events {
				check = check || (ev.IsCreate() && ev.Kv.Lease == int64(sw.s.id))
			}
			if check && !d.sweepOnce(ctx, sw.s, sw.name, sw.key) {
				return ctx.Err() != nil
			}
		case <-horizon.C:
			done, left := d.over(sw)
			if done {
				return true
			}
			horizon.Reset(left)
		case <-ctx.Done():
			return true
		}
	}
}

// sweepOnce deletes key if it is under s, holding the client's slot for
// name (a mutex's; a kind's key, name "", needs none) so that none of the
// client's contenders uses it meanwhile. Once it
// has the slot it tries for sweepCheckTimeout (the slot must not stay taken
// from the client's own contenders while etcd cannot be reached) and
// reports whether the key is known not to be left under s. If it sent a
// delete it could not confirm, the delete is left to the background with
// the slot (dropKeyLater), as a release's is: the client's next contender
// would adopt the key with its revision, and the unconfirmed delete, landing
// late, would take that holder's key.
func (d *etcdDriver) sweepOnce(ctx context.Context, s *session, name, key string) bool {
	done := func() {}
	if name != "" {
		t, err := d.slots.Take(ctx, name, turn.Wait)
		if err != nil {
			return false
		}
		done = t.Done
	}
	cctx, cancel := context.WithTimeout(ctx, sweepCheckTimeout)
	defer cancel()
	var rev int64 // the revision a delete was sent for
	_, err := retry(cctx, func(ctx context.Context) error {
		if rev == 0 {
			resp, err := d.cli.Get(ctx, key, clientv3.WithKeysOnly())
			if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].Lease != int64(s.id) {
				return err
			}
			rev = resp.Kvs[0].CreateRevision
		}
		return d.deleteKey(ctx, key, rev)
	})
	switch {
	case err == nil:
		done()
		return true
	case rev != 0:
		d.dropKeyLater(s, key, rev, done)
		return true // left to the background, which ends with the key gone (or the session)
	default:
		done()
		return false
	}
}
