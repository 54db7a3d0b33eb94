package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
	slots    map[string]*slot // per name: the client's one key for it
}

// slot lets one contender of this client at a time own the client's key for
// a name; the others wait here, in order.
type slot struct {
	ch   chan struct{} // capacity 1
	refs int
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

func newDriver(ctx context.Context, cli *clientv3.Client, prefix string, owned bool) (*etcdDriver, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "dlock-connect-check", clientv3.WithCountOnly()); err != nil {
		return nil, fmt.Errorf("etcdlock: connect: %w", err)
	}
	return &etcdDriver{cli: cli, owned: owned, prefix: prefix,
		sessions: map[time.Duration]*session{}, slots: map[string]*slot{}}, nil
}

func (d *etcdDriver) Caps() driver.Caps {
	return driver.Caps{MaxNameLen: 1024, MinTTL: 2 * time.Second, TTLResolution: time.Second, Blocking: true}
}

// session returns the live session of ttl, starting one if needed.
func (d *etcdDriver) session(ctx context.Context, ttl time.Duration) (*session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, dlock.ErrClosed
	}
	if s := d.sessions[ttl]; s != nil && !s.isLost() {
		return s, nil
	}
	s, err := newSession(ctx, d.cli, ttl)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: lease: %w", err)
	}
	d.sessions[ttl] = s
	return s, nil
}

// takeSlot takes the client's slot for name, waiting if wait is set.
func (d *etcdDriver) takeSlot(ctx context.Context, name string, wait bool) (func(), bool, error) {
	d.mu.Lock()
	s := d.slots[name]
	if s == nil {
		s = &slot{ch: make(chan struct{}, 1)}
		d.slots[name] = s
	}
	s.refs++
	d.mu.Unlock()
	drop := func() {
		d.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(d.slots, name)
		}
		d.mu.Unlock()
	}
	free := func() { <-s.ch; drop() }
	select {
	case s.ch <- struct{}{}:
		return free, true, nil
	default:
	}
	if !wait {
		drop()
		return nil, false, nil
	}
	select {
	case s.ch <- struct{}{}:
		return free, true, nil
	case <-ctx.Done():
		drop()
		return nil, false, ctx.Err()
	}
}

func (d *etcdDriver) Acquire(ctx context.Context, r driver.Request) (driver.Grant, error) {
	if r.Kind != driver.Exclusive {
		return driver.Grant{}, dlock.ErrUnsupported
	}
	free, ok, err := d.takeSlot(ctx, r.Name, r.Wait)
	if err != nil || !ok {
		return driver.Grant{}, err
	}
	pfx := d.prefix + r.Name + "/"
	owner := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
	var sess *session
	var key string
	var resp *clientv3.TxnResponse
	for attempt := 0; ; attempt++ {
		if sess, err = d.session(ctx, r.TTL); err != nil {
			free()
			return driver.Grant{}, err
		}
		key = fmt.Sprintf("%s%x", pfx, int64(sess.id))
		resp, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, r.Owner, clientv3.WithLease(sess.id)), owner).
			Else(clientv3.OpGet(key), owner).
			Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			sess.markLost() // revoked or expired before the keepalive noticed: start a new session
			continue
		}
		break
	}
	if err != nil { // the put may have happened: take the key back
		d.deleteKey(key, 0)
		free()
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire: %w", err)
	}
	rev := resp.Header.Revision
	if !resp.Succeeded { // a key of ours left over: carry on with it
		rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	l := &Lease{Key: key, Revision: rev, LeaseID: sess.id, name: r.Name, sess: sess, free: free}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 && kvs[0].CreateRevision == rev {
		return d.grant(l), nil
	}
	if !r.Wait {
		d.deleteKey(key, rev)
		free()
		return driver.Grant{}, nil
	}
	if err := d.waitTurn(ctx, pfx, rev, resp.Header.Revision); err != nil {
		d.deleteKey(key, rev) // leave nothing behind
		free()
		return driver.Grant{}, err
	}
	return d.grant(l), nil
}

func (d *etcdDriver) grant(l *Lease) driver.Grant {
	l.sess.track(l)
	now := time.Now()
	return driver.Grant{Acquired: true, Token: uint64(l.Revision), Holds: 1, Since: now,
		Validity: l.sess.validity(now), Lost: l.sess.lost, Handle: l}
}

// waitTurn waits until no key of the lock older than rev is left, watching
// only the one just before it.
func (d *etcdDriver) waitTurn(ctx context.Context, pfx string, rev, seen int64) error {
	for {
		resp, err := d.cli.Get(ctx, pfx, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := d.waitDelete(ctx, resp.Kvs[0]); err != nil {
			return err
		}
	}
}

// waitDelete waits until the key kv is deleted. Its watch starts at the
// store's current revision (a watch from an older revision is one etcd
// catches up only every 100ms); once the watch is in place, one read tells
// whether the key went before it.
func (d *etcdDriver) waitDelete(ctx context.Context, kv *mvccpb.KeyValue) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	key := string(kv.Key)
	wch := d.cli.Watch(wctx, key, clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
	created := false
	for wr := range wch {
		if err := wr.Err(); err != nil {
			return err
		}
		if wr.Created && !created {
			created = true
			resp, err := d.cli.Get(ctx, key)
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

// deleteKey deletes key if its create revision is rev (any when rev is 0),
// outliving the caller's ctx.
func (d *etcdDriver) deleteKey(key string, rev int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if rev == 0 {
		_, _ = d.cli.Delete(ctx, key)
		return
	}
	_, _ = d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpDelete(key)).Commit()
}

// Renew checks that every held key is still there, up to 128 in one
// transaction. The keys' lease is kept alive by the session; a lease's
// validity is the session's.
func (d *etcdDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	res := make([]driver.RenewResult, len(batch))
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
				r.Err = fmt.Errorf("etcdlock: renew: %w", err)
			default:
				kvs := resp.Responses[i].GetResponseRange().Kvs
				if len(kvs) == 0 || kvs[0].CreateRevision != l.Revision {
					r.Err = fmt.Errorf("etcdlock: %w: the key was deleted", dlock.ErrLeaseLost)
					l.release() // known gone: the name is free for this client again
				} else {
					r.Validity = l.sess.validity(sent)
				}
			}
		}
	}
	return res
}

func (d *etcdDriver) Release(ctx context.Context, h driver.Held, _ int) (int, error) {
	l, ok := h.Handle.(*Lease)
	if !ok {
		return 0, fmt.Errorf("etcdlock: release: %w", dlock.ErrLeaseLost)
	}
	resp, err := d.cli.Txn(ctx).If(l.IsOwner()).Then(clientv3.OpDelete(l.Key)).Commit()
	if err != nil {
		// Uncertain: the key may remain until the session ends; free the slot
		// only once it is known gone.
		go func() { d.deleteKey(l.Key, l.Revision); l.release() }()
		return 0, fmt.Errorf("etcdlock: release: %w", err)
	}
	l.release()
	if !resp.Succeeded {
		return 0, fmt.Errorf("etcdlock: release: %w: the key was already gone", dlock.ErrLeaseLost)
	}
	return 0, nil
}

// ForceRelease deletes the holder's key, whoever holds it.
func (d *etcdDriver) ForceRelease(ctx context.Context, name string) error {
	resp, err := d.cli.Get(ctx, d.prefix+name+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return fmt.Errorf("etcdlock: force release: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	_, err = d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
		Then(clientv3.OpDelete(string(kv.Key))).Commit()
	return err
}

func (d *etcdDriver) Inspect(ctx context.Context, name string) (driver.Info, error) {
	pfx := d.prefix + name + "/"
	resp, err := d.cli.Txn(ctx).Then(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...),
		clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())).Commit()
	if err != nil {
		return driver.Info{}, fmt.Errorf("etcdlock: inspect: %w", err)
	}
	info := driver.Info{Name: name}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return info, nil
	}
	kv := kvs[0]
	info.Held, info.Owner, info.Holds, info.Token = true, string(kv.Value), 1, uint64(kv.CreateRevision)
	info.Waiters = int(resp.Responses[1].GetResponseRange().Count) - 1
	if ttl, err := d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && ttl.TTL > 0 {
		info.TTL = time.Duration(ttl.TTL) * time.Second
	}
	return info, nil
}

func (d *etcdDriver) Close() error {
	d.mu.Lock()
	d.closed = true
	sessions := d.sessions
	d.sessions = map[time.Duration]*session{}
	d.mu.Unlock()
	for _, s := range sessions {
		s.close(d.cli)
	}
	if d.owned {
		return d.cli.Close()
	}
	return nil
}

// As sets **clientv3.Client targets.
func (d *etcdDriver) As(target any) bool {
	if p, ok := target.(**clientv3.Client); ok {
		*p = d.cli
		return true
	}
	return false
}
