package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// entry is a contender's key in a lock's queue.
type entry struct {
	sess *session
	key  string
	rev  int64 // the key's create revision: the fencing token
	// since is when the last request that found the key first in line (and
	// still under sess's lease) was sent; zero until one has.
	since time.Time
	// unsure is set when enqueue's read could not tell whether the key is
	// first: it found only keys of names under the lock's.
	unsure bool
}

// acquire queues the client's key for r.Name and, with r.Wait, waits for its
// turn. A grant is proven by a request sent after any wait, which found the
// key still there, under a live session lease, and first in line; if the key
// is gone (its session lease expired while the process was paused, or it was
// deleted), the contender queues again with a new key in a live session.
func (d *etcdDriver) acquire(ctx context.Context, r driver.Request, slot *slotHold) (driver.Grant, error) {
	pfx := d.prefix + r.Name + "/"
	for {
		e, err := d.enqueue(ctx, r, pfx, slot)
		if err != nil {
			return driver.Grant{}, err
		}
		if e.since.IsZero() && !r.Wait && e.unsure { // look further, once
			kv, sent, err := d.keyBefore(ctx, d.mutexBefore(pfx), contenderOf(pfx), e)
			switch {
			case errors.Is(err, errKeyGone):
				continue
			case err != nil:
				d.dropKey(e.sess, e.key, e.rev, slot)
				return driver.Grant{}, fmt.Errorf("etcdlock: acquire: %w", err)
			case kv == nil:
				e.since = sent
			}
		}
		g, err := d.hold(ctx, r, e, slot, func(ctx context.Context) error {
			return d.waitTurn(ctx, pfx, e)
		})
		if errors.Is(err, errKeyGone) {
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("etcdlock: acquire: %w", err)
		}
		return g, nil
	}
}

// hold ends an attempt of r whose key e is queued: without r.Wait, a key
// not first in line is dropped and nothing granted; else it waits its turn
// (see await) and is granted, or dropped if the wait fails (leave nothing
// behind), but for errKeyGone, which says to queue again. slot, if not
// nil, is the client's slot for the name, which the grant's lease frees.
func (d *etcdDriver) hold(ctx context.Context, r driver.Request, e *entry, slot *slotHold, turn func(context.Context) error) (driver.Grant, error) {
	if e.since.IsZero() && !r.Wait {
		d.dropKey(e.sess, e.key, e.rev, slot)
		return driver.Grant{}, nil
	}
	validity, err := d.await(ctx, e, r.Wait, turn)
	if errors.Is(err, errKeyGone) {
		return driver.Grant{}, err
	}
	if err != nil {
		d.dropKey(e.sess, e.key, e.rev, slot) // leave nothing behind
		return driver.Grant{}, err
	}
	free := func() {}
	if slot != nil {
		free = slot.done
	}
	l := &Lease{Key: e.key, Revision: e.rev, LeaseID: e.sess.id, name: r.Name, sess: e.sess, free: free}
	e.sess.track(l)
	return driver.Grant{Acquired: true, Token: uint64(e.rev), Holds: 1, Since: e.since,
		Validity: validity, Lost: e.sess.lost, Handle: l}, nil
}

// holderValue is the value of a contender's key: its owner id, a NUL, and
// its label. dlock forbids NUL in both. etcd's concurrency.Mutex and etcdctl
// lock put an empty value and never read it.
func holderValue(owner, label string) string { return owner + "\x00" + label }

// parseHolderValue splits a key's value into owner id and label. An empty
// value (an etcdctl or concurrency.Mutex holder) gives both empty; a value
// without NUL (an older dlock) is an owner id alone.
func parseHolderValue(v []byte) (owner, label string) {
	owner, label, _ = strings.Cut(string(v), "\x00")
	return owner, label
}

// errKeyGone means a contender's key is no longer there, or no longer under
// the session it was put in: it must queue again.
var errKeyGone = errors.New("etcdlock: the contender's key is gone")

// enqueue puts the contender's key under a live session (or finds the one
// left there by an earlier attempt) and reads the first key in line.
func (d *etcdDriver) enqueue(ctx context.Context, r driver.Request, pfx string, slot *slotHold) (*entry, error) {
	first := firstOp(pfx, 0, clientv3.WithKeysOnly()) // its key and create revision are all firstIn needs
	for attempt := 0; ; attempt++ {
		sess, err := d.session(ctx, r.TTL)
		if err != nil {
			return nil, err
		}
		key := fmt.Sprintf("%s%x", pfx, int64(sess.id))
		val := keyValue(ctx, r)
		var resp *clientv3.TxnResponse
		var sent time.Time
		put := func(ctx context.Context) (err error) {
			sent = time.Now()
			// No compare and no else branch: the key's name is the session
			// lease's, so a key of ours left over (a retried put, or one
			// an earlier attempt of this contender queued with) is under
			// that lease already. (An earlier contender's key being dropped
			// keeps the client's slot: see slotHold.) The put gives it this holder's value and keeps
			// its create revision, which its previous value (prevKV) tells.
			resp, err = d.cli.Txn(ctx).
				Then(clientv3.OpPut(key, val, clientv3.WithLease(sess.id), clientv3.WithPrevKV()), first).
				Commit()
			return err
		}
		uncertain := false
		if r.Wait { // the put is idempotent: a retry finds the key
			uncertain, err = retrySettled(ctx, put)
		} else { // one contender, but not one request: a slow etcd is no refusal
			uncertain, err = retrySettledWithin(ctx, tryLimit, put)
		}
		if uncertain || (err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound)) {
			d.sweepLatePuts(sess, r.Name, key) // an attempt may land after this contender is done
		}
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt < 2 {
			sess.markLost() // expired or revoked before the keepalive noticed: start a new session
			continue
		}
		if err != nil { // the put may have happened: take the key back
			d.dropKey(sess, key, 0, slot)
			return nil, fmt.Errorf("etcdlock: acquire: %w", err)
		}
		e := &entry{sess: sess, key: key, rev: resp.Header.Revision}
		if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev != nil { // a key of ours left over: carry on with it
			e.rev = prev.CreateRevision
		}
		kv, unsure := firstIn(pfx, resp.Responses[1].GetResponseRange())
		if kv != nil && kv.CreateRevision == e.rev {
			e.since = sent
		}
		e.unsure = unsure
		return e, nil
	}
}

// await waits, with wait, until e holds (e.since set) — turn waits for that:
// waitTurn for a mutex key, waitKindTurn for a reader, writer or permit —
// then makes sure the session lease is known to live long enough, and
// returns the grant's validity counted from e.since. It returns errKeyGone
// if the key is gone; another error if ctx ended or etcd could not be
// reached (without wait, after one try).
func (d *etcdDriver) await(ctx context.Context, e *entry, wait bool, turn func(context.Context) error) (time.Duration, error) {
	pause := retryPause
	for {
		if e.since.IsZero() {
			if err := turn(ctx); err != nil {
				return 0, err
			}
		}
		validity, err := d.confirm(ctx, e, wait)
		if err == nil || !wait || errors.Is(err, errKeyGone) || ctx.Err() != nil {
			return validity, err
		}
		// The lease could not be refreshed: prove the turn again, then retry.
		e.since = time.Time{}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// confirm returns how long past e.since the session lease is known to live.
// When less than half the TTL is left (the process was paused, or the
// keepalive has been failing), it refreshes the lease first: the key was
// there at e.since and a lease that etcd still has has not expired since, so
// the refresh extends what the grant is known to be valid for.
func (d *etcdDriver) confirm(ctx context.Context, e *entry, wait bool) (time.Duration, error) {
	s := e.sess
	if s.remaining() < s.ttl/2 {
		refresh := func(ctx context.Context) error { return s.refresh(ctx, d.cli) }
		var err error
		if wait {
			_, err = retry(ctx, refresh)
		} else {
			_, err = retryWithin(ctx, tryLimit, refresh)
		}
		if errors.Is(err, errSessionLost) {
			return 0, errKeyGone
		}
		if err != nil {
			return 0, fmt.Errorf("session lease not confirmed: %w", err)
		}
	}
	s.mu.Lock()
	v := s.safe.Sub(e.since)
	s.mu.Unlock()
	if v < s.ttl/2 {
		return 0, errors.New("session lease not confirmed")
	}
	return v, nil
}

// waitTurn waits until no contender of the lock older than e's is left,
// watching only the one just before it.
func (d *etcdDriver) waitTurn(ctx context.Context, pfx string, e *entry) error {
	return d.waitBehind(ctx, d.mutexBefore(pfx), contenderOf(pfx), e)
}

// mutexBefore reads the keys under pfx created at or before maxRev, the
// latest first, a page of them (keys only).
func (d *etcdDriver) mutexBefore(pfx string) func(maxRev int64) clientv3.Op {
	return func(maxRev int64) clientv3.Op {
		return clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
			clientv3.WithMaxCreateRev(maxRev), clientv3.WithLimit(pageSize), clientv3.WithKeysOnly())
	}
}

// contenderOf is contender for pfx's lock.
func contenderOf(pfx string) func(key []byte) bool {
	return func(key []byte) bool { return contender(pfx, key) }
}

// waitBehind waits until no key that keeps e out is left, watching the
// latest of them until it is deleted. before(maxRev) reads the keys that
// may keep e out created at or before maxRev, the latest first; keeps (nil:
// any) tells those that do. The read that finds none is the proof of the
// turn: it also finds e's key still there under e's session, and e.since is
// set to its send time. It returns errKeyGone if the key is gone or the
// session is lost meanwhile.
func (d *etcdDriver) waitBehind(ctx context.Context, before func(maxRev int64) clientv3.Op, keeps func(key []byte) bool, e *entry) error {
	for {
		kv, sent, err := d.keyBefore(ctx, before, keeps, e)
		if err != nil {
			return err
		}
		if kv == nil {
			e.since = sent
			return nil
		}
		// kv may have no value (keys only) but has its key and create
		// revision.
		err = d.waitDelete(ctx, kv, e.sess.lost)
		if err != nil && (errors.Is(err, errKeyGone) || ctx.Err() != nil || !transient(err)) {
			return err
		}
		if err != nil { // no leader for a moment, a member gone: read and watch again
			select {
			case <-time.After(retryPause):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// keyBefore returns the latest key created before e's that keeps e out (see
// waitBehind), nil if none, and the send time of the read that found it,
// which also found e's key in place. It reads a page at a time, each with
// e's key: a key created before e's cannot appear after a read, so a page
// that finds none of the keys before the previous page's proves none is left.
func (d *etcdDriver) keyBefore(ctx context.Context, before func(maxRev int64) clientv3.Op, keeps func(key []byte) bool, e *entry) (*mvccpb.KeyValue, time.Time, error) {
	for maxRev := e.rev - 1; ; {
		resp, sent, err := d.readTurn(ctx, before(maxRev), e)
		if err != nil {
			return nil, time.Time{}, err
		}
		r := resp.Responses[0].GetResponseRange()
		for _, kv := range r.Kvs {
			if keeps == nil || keeps(kv.Key) {
				return kv, sent, nil
			}
		}
		if !r.More || len(r.Kvs) == 0 {
			return nil, sent, nil
		}
		maxRev = nextRev(r.Kvs[len(r.Kvs)-1].CreateRevision, maxRev, -1)
	}
}

// readTurn reads before and e's key in one transaction, and returns the
// response (before's result first) and the read's send time. It returns
// errKeyGone if e's key is gone or no longer held under e's session.
func (d *etcdDriver) readTurn(ctx context.Context, before clientv3.Op, e *entry) (*clientv3.TxnResponse, time.Time, error) {
	var resp *clientv3.TxnResponse
	var sent time.Time
	_, err := retry(ctx, func(ctx context.Context) (err error) {
		sent = time.Now()
		resp, err = d.cli.Txn(ctx).Then(before, clientv3.OpGet(e.key)).Commit()
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	own := resp.Responses[1].GetResponseRange().Kvs
	if len(own) == 0 || own[0].CreateRevision != e.rev || own[0].Lease != int64(e.sess.id) {
		return nil, time.Time{}, errKeyGone
	}
	return resp, sent, nil
}

// waitDelete waits until the key kv is deleted, or returns errKeyGone when
// lost closes. Its watch starts at the store's current revision (a watch from
// an older revision is one etcd catches up only every 100ms); once the watch
// is in place, one read tells whether the key went before it.
func (d *etcdDriver) waitDelete(ctx context.Context, kv *mvccpb.KeyValue, lost <-chan struct{}) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	key := string(kv.Key)
	wch := d.cli.Watch(wctx, key, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	created := false
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-wch:
		case <-lost:
			return errKeyGone
		}
		if !ok {
			break
		}
		if err := wr.Err(); err != nil {
			return err
		}
		if wr.Created && !created {
			created = true
			var resp *clientv3.GetResponse
			_, err := retry(ctx, func(ctx context.Context) (err error) {
				resp, err = d.cli.Get(ctx, key)
				return err
			})
			if err != nil {
				return err
			}
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != kv.CreateRevision {
				return nil // gone before the watch started
			}
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("etcdlock: watch closed")
}

// deleteKey deletes key if its create revision is rev. With rev 0 (a put
// whose outcome is unknown) it reads the key's create revision first and
// deletes the key only if it still has that one: every delete carries a
// revision. A delete by name alone whose attempt timed out may reach etcd
// after a retry succeeded and the client's next contender for the name put
// the same key (it is named after the session lease), and take that
// holder's key; a delete of one revision cannot, as revisions never come
// back.
func (d *etcdDriver) deleteKey(ctx context.Context, key string, rev int64) error {
	if rev == 0 {
		resp, err := d.cli.Get(ctx, key, clientv3.WithKeysOnly())
		if err != nil || len(resp.Kvs) == 0 {
			return err
		}
		rev = resp.Kvs[0].CreateRevision
	}
	_, err := d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).Commit()
	return err
}

// dropKey deletes a contender's key that is given up, outliving the caller's
// ctx: one attempt now, then (see dropKeyLater) in the background until it is
// gone.
// The contender's slot (a mutex's slot for the name, a read-write lock or
// semaphore key's name), if not nil, is kept until the key is gone.
func (d *etcdDriver) dropKey(s *session, key string, rev int64, slot *slotHold) {
	ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
	err := testDropHook(false)
	if err == nil {
		err = d.deleteKey(ctx, key, rev)
	}
	cancel()
	switch {
	case err == nil:
	case slot != nil:
		slot.keep()
		d.dropKeyLater(s, key, rev, slot.done)
	default:
		d.dropKeyLater(s, key, rev, func() {})
	}
}

// dropHook, set only by tests (export_test.go), runs before each attempt to
// delete a given-up key: in dropKey (background false; an error fails the
// attempt) and in dropKeyLater (background true), where a test can hold the
// background delete back.
var dropHook atomic.Pointer[func(background bool) error]

func testDropHook(background bool) error {
	if f := dropHook.Load(); f != nil {
		return (*f)(background)
	}
	return nil
}

// dropKeyLater deletes key in the background, retrying until it is gone, its
// session's lease is (which takes the key with it) or the driver is closed
// (which revokes the lease); then it calls done. A key left under a lease the
// session keeps alive would hold the lock for good.
func (d *etcdDriver) dropKeyLater(s *session, key string, rev int64, done func()) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		done()
		return
	}
	d.bg.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.bg.Done()
		defer done()
		ctx, cancel := context.WithCancel(d.bgCtx)
		defer cancel()
		go func() {
			select {
			case <-s.lost:
				cancel()
			case <-ctx.Done():
			}
		}()
		for ctx.Err() == nil {
			_ = testDropHook(true)
			if _, err := retry(ctx, func(ctx context.Context) error { return d.deleteKey(ctx, key, rev) }); err == nil {
				return
			}
			select { // an error a retry cannot mend (auth?): try again now and then
			case <-time.After(maxRetryPause):
			case <-ctx.Done():
			}
		}
	}()
}
