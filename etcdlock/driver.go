package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/turn"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxTxnOps is etcd's default limit of operations in one transaction.
const maxTxnOps = 128

type etcdDriver struct {
	cli    *clientv3.Client
	owned  bool
	prefix string

	mu       sync.Mutex
	closed   bool
	sessions map[time.Duration]*session
	// per name: the client's one key for it, owned by one contender at a
	// time; the others wait, in order
	slots turn.Set[string]

	// keys whose contender's put may land late, and until when each is
	// watched for that (sweep.go)
	sweeps map[string]*sweep
	// the names of read-write lock and semaphore keys in use, per session
	// and prefix (kindkeys.go)
	kindKeys map[kindPoolKey]*kindKeys

	bgCtx    context.Context // background key removals, and session grants; cancelled by Close first
	bgCancel context.CancelFunc
	bg       sync.WaitGroup
}

// Lease is the etcd view of a held lock, reached with dlock's Lease.As.
type Lease struct {
	Key      string           // the holder's key
	Revision int64            // its create revision (the fencing token)
	LeaseID  clientv3.LeaseID // the session lease it lives under

	name string
	sess *session
	free func()
	once sync.Once
}

// release frees the client's slot for the name, once.
func (l *Lease) release() {
	l.once.Do(func() {
		l.sess.untrack(l)
		l.free()
	})
}

// IsOwner is a comparison that holds while this lease holds the lock: put it
// in the If of a transaction to write to etcd only as the holder.
func (l *Lease) IsOwner() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.Key), "=", l.Revision)
}

// As sets **Lease targets.
func (l *Lease) As(target any) bool {
	if p, ok := target.(**Lease); ok {
		*p = l
		return true
	}
	return false
}

// newDriver checks that cli reaches etcd, within connect (a URL's
// dial_timeout, or 10s for a caller's client) and ctx.
func newDriver(ctx context.Context, cli *clientv3.Client, prefix string, owned bool, log *slog.Logger, connect time.Duration) (*etcdDriver, error) {
	ctx, cancel := context.WithTimeout(ctx, connect)
	defer cancel()
	// A key under the prefix: a user whose role covers only the prefix may read it.
	if _, err := cli.Get(ctx, prefix+"dlock-connect-check", clientv3.WithCountOnly()); err != nil {
		return nil, permErr(fmt.Errorf("etcdlock: connect: %w", err), prefix)
	}
	checkVersion(ctx, cli, log)
	bgCtx, bgCancel := context.WithCancel(context.Background())
	return &etcdDriver{cli: cli, owned: owned, prefix: prefix, sessions: map[time.Duration]*session{},
		bgCtx: bgCtx, bgCancel: bgCancel}, nil
}

func (d *etcdDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: 2 * time.Second, TTLResolution: time.Second, Blocking: true,
		Kinds: []driver.Kind{driver.Shared, driver.Write, driver.Permit}}
}

// session returns the live session of ttl, starting one if needed.
func (d *etcdDriver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, dlock.ErrClosed
	}
	old := d.sessions[ttl]
	if old != nil && !old.isLost() {
		return old, nil
	}
	// The grant is retried, under d.mu, until ctx ends: Close, which needs
	// d.mu, ends it first through bgCtx (a TryLock's ctx may never end).
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(d.bgCtx, stop)()
	s, err := newSession(gctx, d.cli, ttl)
	if err != nil && d.bgCtx.Err() != nil && ctx.Err() == nil {
		return nil, dlock.ErrClosed
	}
	if err != nil {
		return nil, fmt.Errorf("etcdlock: lease: %w", err)
	}
	d.sessions[ttl] = s
	if old != nil {
		d.forgetKindKeys(old)
	}
	return s, nil
}

// takeSlot takes the client's slot for name, waiting if wait is set. It
// returns the function that frees it, or false if it is taken and wait is
// not set.
func (d *etcdDriver) takeSlot(ctx context.Context, name string, wait bool) (func(), bool, error) {
	mode := turn.Try
	if wait {
		mode = turn.Wait
	}
	t, err := d.slots.Take(ctx, name, mode)
	switch {
	case errors.Is(err, turn.ErrBusy):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return t.Done, true, nil
}

func (d *etcdDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return d.acquireKind(ctx, r) // kinds.go
	}
	free, ok, err := d.takeSlot(ctx, r.Name, r.Wait)
	if err != nil || !ok {
		return driver.Grant{}, err
	}
	slot := &slotHold{refs: 1, free: free}
	g, err := d.acquire(ctx, r, slot)
	if err != nil || !g.Acquired {
		slot.done()
	}
	return g, permErr(err, d.prefix)
}

// slotHold is a mutex contender's hold on its client's slot for the name
// (see takeSlot), or a read-write lock or semaphore contender's on its key's
// name (takeKindKey). It is freed once the contender is done with it (a
// grant's Lease keeps it until released) and no key the contender put is
// still being deleted in the background: the client's next contender for
// the name would put the same key (its name is the session lease's, or the
// one given back), take it over, and lose it to the late delete while it
// holds the lock.
type slotHold struct {
	mu    sync.Mutex
	refs  int // the contender, and each background delete of its key
	burnt bool
	free  func()
}

// burn says that a put of the key had no certain answer: its name must not
// be given back (kindkeys.go).
func (s *slotHold) burn() {
	s.mu.Lock()
	s.burnt = true
	s.mu.Unlock()
}

func (s *slotHold) isBurnt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.burnt
}

// keep holds the slot for one more background delete.
func (s *slotHold) keep() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

// done drops one hold; the last frees the slot.
func (s *slotHold) done() {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last {
		s.free()
	}
}

// Renew checks that every held key is still there, up to 128 in one
// transaction. The keys' lease is kept alive by the session; a lease's
// validity is the session's, refreshed first if it falls short of the TTL
// asked for (see validity).
func (d *etcdDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
	refreshed := map[*session]bool{}
	for start := 0; start < len(batch); start += maxTxnOps {
		part := batch[start:min(start+maxTxnOps, len(batch))]
		ops := make([]clientv3.Op, len(part))
		for i, h := range part {
			ops[i] = clientv3.OpGet(h.Handle.(*Lease).Key)
		}
		sent := time.Now()
		resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
		for i, h := range part {
			l := h.Handle.(*Lease)
			r := &res[start+i]
			switch {
			case l.sess.isLost():
				r.Err = fmt.Errorf("etcdlock: %w: session lease expired or revoked", dlock.ErrLeaseLost)
			case err != nil:
				r.Err = permErr(fmt.Errorf("etcdlock: renew: %w", err), d.prefix)
			default:
				kvs := resp.Responses[i].GetResponseRange().Kvs
				if len(kvs) == 0 || kvs[0].CreateRevision != l.Revision {
					r.Err = fmt.Errorf("etcdlock: %w: the key was deleted", dlock.ErrLeaseLost)
					l.release() // known gone: the name is free for this client again
				} else {
					r.Validity = d.validity(ctx, l.sess, sent, h.TTL, refreshed)
					if l.sess.isLost() {
						r.Validity = 0
						r.Err = fmt.Errorf("etcdlock: %w: session lease expired or revoked", dlock.ErrLeaseLost)
					}
				}
			}
		}
	}
	return res
}

// validity is how long past sent a hold on sess confirmed by a request sent
// then is known to live, for a renewal or Extend asking for ttl. The hold
// lives as long as its session's lease: if the lease is known to live less
// than ttl (at most its own TTL) past sent, because its keepalive is due or
// was held up by a loaded process, the lease is refreshed now, once per
// session of a Renew call (refreshed), rather than have an Extend that
// returns nil leave the hold at its old expiry. A failed refresh leaves the
// validity known before it.
func (d *etcdDriver) validity(ctx context.Context, sess *session, sent time.Time, ttl time.Duration, refreshed map[*session]bool) time.Duration {
	if v := sess.validity(sent); v >= min(ttl, sess.ttl) || refreshed[sess] {
		return v
	}
	refreshed[sess] = true
	_ = sess.refresh(ctx, d.cli) // a lost session is seen by the caller
	return sess.validity(sent)
}

// Release deletes the holder's key, retrying each attempt bounded by
// attemptTimeout until ctx ends or for the TTL at most. If it cannot, the key
// is deleted in the background (the client's slot for the name is freed once
// it is gone).
func (d *etcdDriver) Release(ctx context.Context, h driver.Held, _ int) error {
	l, ok := h.Handle.(*Lease)
	if !ok {
		return fmt.Errorf("etcdlock: release: %w", dlock.ErrLeaseLost)
	}
	var resp *clientv3.TxnResponse
	// An unreachable store: retry for the TTL at most, then leave it to the background.
	retried, err := retryWithin(ctx, h.TTL, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).If(l.IsOwner()).Then(clientv3.OpDelete(l.Key)).Commit()
		return err
	})
	if err != nil {
		// Uncertain: the key may remain while the session lives; free the
		// slot only once it is known gone.
		d.dropKeyLater(l.sess, l.Key, l.Revision, l.release)
		return permErr(fmt.Errorf("etcdlock: release: %w", err), d.prefix)
	}
	l.release()
	if !resp.Succeeded && !retried { // after an uncertain attempt, gone is likely our own delete
		return fmt.Errorf("etcdlock: release: %w: the key was already gone", dlock.ErrLeaseLost)
	}
	return nil
}

// ForceRelease deletes the holder's key, whoever holds it (token 0), or
// only a holder's whose token (its key's create revision) is token.
func (d *etcdDriver) ForceRelease(ctx context.Context, name string, token uint64) error {
	kv, _, err := d.first(ctx, d.prefix+name+"/", false)
	if err != nil {
		return permErr(fmt.Errorf("etcdlock: force release: %w", err), d.prefix)
	}
	if kv == nil || token != 0 && uint64(kv.CreateRevision) != token {
		return nil
	}
	_, err = d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
		Then(clientv3.OpDelete(string(kv.Key))).Commit()
	return permErr(err, d.prefix)
}

func (d *etcdDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	info, _, err := d.inspect(ctx, name)
	return info, err
}

// inspect is Inspect that also returns the holder's value as stored, read
// in the same request as the rest.
func (d *etcdDriver) inspect(ctx context.Context, name string) (driver.Info, []byte, error) {
	kv, n, err := d.first(ctx, d.prefix+name+"/", true)
	if err != nil {
		return driver.Info{}, nil, permErr(fmt.Errorf("etcdlock: inspect: %w", err), d.prefix)
	}
	info := driver.Info{Name: name}
	if kv == nil {
		return info, nil, nil
	}
	info.Owner, info.Label = parseHolderValue(kv.Value)
	info.Held, info.Holds, info.Token = true, 1, uint64(kv.CreateRevision)
	info.Waiters = n - 1
	if ttl, err := d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL > 0 {
		info.TTL = time.Duration(ttl.TTL) * time.Second
	}
	return info, kv.Value, nil
}

func (d *etcdDriver) Close() error {
	d.bgCancel() // first: it ends a session grant under way, which holds d.mu
	d.mu.Lock()
	d.closed = true
	sessions := d.sessions
	d.sessions = map[time.Duration]*session{}
	d.mu.Unlock()
	d.bg.Wait()
	for _, s := range sessions {
		s.close(d.cli)
	}
	if d.owned {
		return d.cli.Close()
	}
	return nil
}

// As sets **clientv3.Client targets (and, for this package's tests,
// **etcdDriver).
func (d *etcdDriver) As(target any) bool {
	switch p := target.(type) {
	case **clientv3.Client:
		*p = d.cli
		return true
	case **etcdDriver:
		*p = d
		return true
	}
	return false
}
