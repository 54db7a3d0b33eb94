package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys of the read-write locks and semaphores. A name cannot hold a NUL, so
// these never fall under a mutex's prefix (<prefix><name>/) nor under
// another name's: a family marker first, the name ended by a NUL.
//
//	<prefix>\x00rw\x00<name>\x00r/<lease>_<n>       a read hold or waiter (n: kindkeys.go)
//	<prefix>\x00rw\x00<name>\x00w/<lease>_<n>       a write hold or waiter
//	<prefix>\x00sem\x00<name>\x00<lease>_<n>        a permit hold or waiter
//	<prefix>\x00sem\x00<name>                       the semaphore's limit
func (d *etcdDriver) rwPrefix(name string) string { return d.prefix + "\x00rw\x00" + name + "\x00" }
func (d *etcdDriver) semLimitKey(name string) string {
	return d.prefix + "\x00sem\x00" + name
}
func (d *etcdDriver) semPrefix(name string) string { return d.semLimitKey(name) + "\x00" }

// kindQuery is what a contender of a read-write lock or semaphore waits for:
// the keys whose presence before its own keep it from holding.
type kindQuery struct {
	pfx   string // the prefix its key goes under
	scan  string // the prefix of the keys it waits for
	limit int    // it holds when fewer than limit keys of scan come before it
}

func (d *etcdDriver) queryOf(r driver.Request) kindQuery {
	switch r.Kind {
	case driver.Shared:
		p := d.rwPrefix(r.Name)
		return kindQuery{pfx: p + "r/", scan: p + "w/", limit: 1} // no writer before it
	case driver.Write:
		p := d.rwPrefix(r.Name)
		return kindQuery{pfx: p + "w/", scan: p, limit: 1} // no key before it
	default:
		p := d.semPrefix(r.Name)
		return kindQuery{pfx: p, scan: p, limit: r.Limit} // fewer than Limit before it
	}
}

// before reads the keys of q.scan created before rev, the latest first, up
// to q.limit of them (keys only).
func (q kindQuery) before(rev int64) clientv3.Op {
	return clientv3.OpGet(q.scan, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
		clientv3.WithMaxCreateRev(rev-1), clientv3.WithLimit(int64(q.limit)), clientv3.WithKeysOnly())
}

// acquireKind takes a read or write hold of a read-write lock or a permit of
// a semaphore. Unlike the mutex's, each contender has a key of its own
// (several readers or permit holders of one client share its session), so
// no per-client slot is taken: its key's name is held instead (kindkeys.go).
func (d *etcdDriver) acquireKind(ctx context.Context, r driver.Request) (driver.Grant, error) {
	switch r.Kind {
	case driver.Shared, driver.Write:
	case driver.Permit:
		if r.Limit < 1 {
			return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: a semaphore needs at least 1 permit, not %d", r.Name, dlock.ErrInvalidConfig, r.Limit)
		}
	default:
		return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w: kind %v", r.Name, dlock.ErrUnsupported, r.Kind)
	}
	q := d.queryOf(r)
	for {
		e, slot, err := d.enqueueKind(ctx, r, q)
		if err != nil {
			return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", r.Name, err)
		}
		g, err := d.hold(ctx, r, e, slot, func(ctx context.Context) error {
			return d.waitKindTurn(ctx, q, e)
		})
		if err != nil || !g.Acquired { // the key is gone, or dropped (a background drop keeps the name)
			slot.done()
		}
		if errors.Is(err, errKeyGone) {
			continue
		}
		if err != nil {
			return driver.Grant{}, fmt.Errorf("etcdlock: acquire %q: %w", r.Name, err)
		}
		return g, nil
	}
}

// errLimitChanged: the semaphore's limit key changed between its read and
// the transaction that relied on it; read again.
var errLimitChanged = errors.New("etcdlock: the semaphore's limit changed")

// enqueueKind puts the contender's key under a live session and counts, in
// the same transaction, the keys it waits for, to tell whether it holds at
// once. A permit's key goes in only while the stored limit is r.Limit, or
// (storing r.Limit) while the semaphore has no keys, or no limit stored.
// The slotHold it returns holds the key's name (takeKindKey) until done.
func (d *etcdDriver) enqueueKind(ctx context.Context, r driver.Request, q kindQuery) (*entry, *slotHold, error) {
	limitKey := d.semLimitKey(r.Name)
	limit := strconv.Itoa(r.Limit)
	mineScanned := strings.HasPrefix(q.pfx, q.scan) // our own key is among those counted
	for attempt := 0; ; attempt++ {
		sess, err := d.session(ctx, r.TTL)
		if err != nil {
			return nil, nil, err
		}
		key, slot := d.takeKindKey(sess, q.pfx)
		val := holderValue(r.Owner, r.Label)
		// How the limit is checked: as stored (same), over an empty
		// semaphore (empty), or over a missing limit key (missing).
		how := "same"
		var (
			resp *clientv3.TxnResponse
			sent time.Time
		)
		put := func(ctx context.Context) (err error) {
			cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
			then := []clientv3.Op{clientv3.OpPut(key, val, clientv3.WithLease(sess.id)),
				clientv3.OpGet(q.scan, clientv3.WithPrefix(), clientv3.WithCountOnly())}
			if r.Kind == driver.Permit {
				switch how {
				case "same":
					cmps = append(cmps, clientv3.Compare(clientv3.Value(limitKey), "=", limit))
				case "empty":
					cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(q.pfx), "=", 0).WithPrefix())
				case "missing":
					cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(limitKey), "=", 0))
				}
				if how != "same" {
					then = append(then, clientv3.OpPut(limitKey, limit))
				}
			}
			sent = time.Now()
			resp, err = d.cli.Txn(ctx).If(cmps...).Then(then...).
				Else(clientv3.OpGet(key), clientv3.OpGet(limitKey), clientv3.OpGet(q.pfx, clientv3.WithPrefix(), clientv3.WithCountOnly())).
				Commit()
			return err
		}
		for tries := 0; ; tries++ {
			if tries > 0 && ctx.Err() != nil { // a permit's limit check failed: no new try once ctx ended
				err = ctx.Err()
				break
			}
			uncertain := false
			if r.Wait { // the put is idempotent: a retry finds the key
				uncertain, err = retrySettled(ctx, put)
			} else { // one contender, but not one request: a slow etcd is no refusal
				uncertain, err = retrySettledWithin(ctx, tryLimit, put)
			}
			if uncertain || (err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound)) {
				slot.burn() // a put may land later: the name is not used again
			}
			if err != nil || resp.Succeeded || len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
				break // done, failed, or our key went in on an earlier try
			}
			// A permit, and the limit check failed.
			stored := resp.Responses[1].GetResponseRange().Kvs
			keys := resp.Responses[2].GetResponseRange().Count
			switch {
			case len(stored) > 0 && string(stored[0].Value) == limit:
				how = "same"
			case keys == 0: // no holds or waiters: our limit replaces the old
				how = "empty"
			case len(stored) == 0: // keys but no limit (deleted by hand): store ours
				how = "missing"
			default:
				slot.done()
				return nil, nil, fmt.Errorf("%w: %d permits asked for, %d held or waiting under a limit of %s",
					dlock.ErrLimitMismatch, r.Limit, keys, stored[0].Value)
			}
			if tries > 10 {
				slot.done()
				return nil, nil, errLimitChanged
			}
		}
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt < 2 {
			sess.markLost() // expired or revoked before the keepalive noticed: start a new session
			slot.done()
			continue
		}
		if err != nil { // the put may have happened: take the key back
			d.dropKey(sess, key, 0, slot)
			slot.done()
			return nil, nil, err
		}
		e := &entry{sess: sess, key: key}
		if !resp.Succeeded { // our key, from an earlier try or attempt: waitKindTurn reads where it stands
			e.rev = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
			if r.Wait {
				return e, slot, nil
			}
			// A single attempt does not wait: it must know now. (A TryLock
			// whose first attempt landed but timed out, on a slow etcd,
			// was refused by its own key: "held by another owner".)
			since, err := d.standing(ctx, q, e)
			if errors.Is(err, errKeyGone) {
				slot.done()
				continue
			}
			if err != nil {
				d.dropKey(sess, key, e.rev, slot)
				slot.done()
				return nil, nil, err
			}
			e.since = since
			return e, slot, nil
		}
		// The transaction's reads see our key as the newest: every other
		// key counted comes before it.
		e.rev = resp.Header.Revision
		before := resp.Responses[1].GetResponseRange().Count
		if mineScanned {
			before--
		}
		if before < int64(q.limit) {
			e.since = sent
		}
		return e, slot, nil
	}
}

// standing reads whether fewer than q.limit keys of q.scan come before e's
// (then the read's send time, from which the hold counts; else zero), for
// at most tryLimit. It returns errKeyGone if e's key is gone.
func (d *etcdDriver) standing(ctx context.Context, q kindQuery, e *entry) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, tryLimit)
	defer cancel()
	// Keys only, not a count: etcd counts a range before it filters it.
	resp, sent, err := d.readTurn(ctx, clientv3.OpGet(q.scan, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithMaxCreateRev(e.rev-1)), e)
	if err != nil {
		return time.Time{}, err
	}
	if len(resp.Responses[0].GetResponseRange().Kvs) < q.limit {
		return sent, nil
	}
	return time.Time{}, nil
}

// waitKindTurn waits until fewer than q.limit keys of q.scan come before
// e's. A reader or writer (limit 1) watches only the key just before it
// that keeps it out: the last writer before a reader, the last key before a
// writer. A permit cannot: any of the keys before it may go first, so it
// watches the deletions under the semaphore's prefix, and reads again only
// once enough of the keys it counted before it are gone. The read that
// finds it holding proves the turn, as for the mutex.
func (d *etcdDriver) waitKindTurn(ctx context.Context, q kindQuery, e *entry) error {
	if q.limit > 1 {
		return d.waitPermit(ctx, q, e)
	}
	return d.waitBehind(ctx, func(maxRev int64) clientv3.Op { return q.before(maxRev + 1) }, nil, e)
}

// waitPermit is waitKindTurn for a permit.
func (d *etcdDriver) waitPermit(ctx context.Context, q kindQuery, e *entry) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var wch clientv3.WatchChan
	for {
		if wch == nil {
			wch = d.cli.Watch(wctx, q.scan, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
			if err := created(ctx, wch, e.sess.lost); err != nil {
				wch = nil
				if errors.Is(err, errKeyGone) || ctx.Err() != nil || !transient(err) {
					return err
				}
				select {
				case <-time.After(retryPause):
				case <-ctx.Done():
					return ctx.Err()
				}
				continue
			}
		}
		// Every key before ours.
		resp, sent, err := d.readTurn(ctx, clientv3.OpGet(q.scan, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(e.rev-1), clientv3.WithKeysOnly()), e)
		if err != nil {
			return err
		}
		// A key's name is put again only after its key is deleted
		// (takeKindKey), and the new key comes after ours: each name read
		// here stands for one key until its first deletion after the read.
		ahead := map[string]bool{}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			ahead[string(kv.Key)] = true
		}
		if len(ahead) < q.limit {
			e.since = sent
			return nil
		}
		readRev := resp.Header.Revision
		// Count the deletions of those keys after the read, until enough
		// are gone for a permit.
		for len(ahead) >= q.limit {
			var wr clientv3.WatchResponse
			var ok bool
			select {
			case wr, ok = <-wch:
			case <-e.sess.lost:
				return errKeyGone
			}
			if !ok || wr.Err() != nil {
				if err := ctx.Err(); err != nil {
					return err
				}
				wch = nil // a broken watch: start again
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete && ev.Kv.ModRevision > readRev {
					delete(ahead, string(ev.Kv.Key))
				}
			}
		}
	}
}

// created waits for a watch's creation, which is when it is in place.
func created(ctx context.Context, wch clientv3.WatchChan, lost <-chan struct{}) error {
	select {
	case wr, ok := <-wch:
		if !ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			return errors.New("etcdlock: watch closed")
		}
		if err := wr.Err(); err != nil {
			return err
		}
		if !wr.Created {
			return errors.New("etcdlock: watch not created")
		}
		return nil
	case <-lost:
		return errKeyGone
	}
}

// kindHolders reads the read-write lock (Shared or Write) or semaphore
// (Permit) named name: its live holds' keys, in token order, and an Info
// with the kind of hold, the semaphore's stored limit and the waiters.
func (d *etcdDriver) kindHolders(ctx context.Context, name string, kind driver.Kind) (driver.Info, []*mvccpb.KeyValue, error) {
	info := driver.Info{Name: name, Kind: kind}
	sorted := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)}
	var ops []clientv3.Op
	switch kind {
	case driver.Shared, driver.Write:
		info.Kind = driver.Shared
		ops = []clientv3.Op{clientv3.OpGet(d.rwPrefix(name), sorted...)}
	case driver.Permit:
		ops = []clientv3.Op{clientv3.OpGet(d.semPrefix(name), sorted...), clientv3.OpGet(d.semLimitKey(name))}
	default:
		return info, nil, fmt.Errorf("%w: kind %v", dlock.ErrUnsupported, kind)
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return info, nil, err
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	var holders []*mvccpb.KeyValue
	if kind == driver.Permit {
		if lk := resp.Responses[1].GetResponseRange().Kvs; len(lk) > 0 {
			info.Limit, _ = strconv.Atoi(string(lk[0].Value))
		}
		holders = kvs
		if info.Limit > 0 && len(kvs) > info.Limit {
			holders = kvs[:info.Limit]
		}
	} else {
		wpfx := d.rwPrefix(name) + "w/"
		for i, kv := range kvs {
			w := len(kv.Key) >= len(wpfx) && string(kv.Key[:len(wpfx)]) == wpfx
			if w && i == 0 {
				holders = kvs[:1]
				info.Kind = driver.Write
				break
			}
			if w {
				break
			}
			holders = kvs[:i+1]
		}
	}
	info.Waiters = len(kvs) - len(holders)
	return info, holders, nil
}

// InspectKind implements driver.KindInspector: every live hold of the
// read-write lock (Shared or Write) or semaphore (Permit) named name, with
// the semaphore's stored limit, and the number of waiters.
func (d *etcdDriver) InspectKind(ctx context.Context, name string, kind driver.Kind) (driver.Info, error) {
	info, holders, err := d.kindHolders(ctx, name, kind)
	if err != nil {
		return info, fmt.Errorf("etcdlock: inspect %q: %w", name, err)
	}
	ttls := map[int64]time.Duration{}
	for _, kv := range holders {
		h := driver.Holder{Kind: kind, Token: uint64(kv.CreateRevision), Holds: 1}
		if kind != driver.Permit {
			h.Kind = driver.Shared
			if info.Kind == driver.Write {
				h.Kind = driver.Write
			}
		}
		h.Owner, h.Label = parseHolderValue(kv.Value)
		ttl, ok := ttls[kv.Lease]
		if !ok {
			if t, err := d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err == nil && t.TTL > 0 {
				ttl = time.Duration(t.TTL) * time.Second
			}
			ttls[kv.Lease] = ttl
		}
		h.TTL = ttl
		info.Holders = append(info.Holders, h)
	}
	if len(info.Holders) > 0 {
		best := info.Holders[0]
		if best.Kind != driver.Write {
			best = info.Holders[len(info.Holders)-1] // the greatest token
		}
		info.Held, info.Owner, info.Label, info.Holds, info.Token, info.TTL = true, best.Owner, best.Label, best.Holds, best.Token, best.TTL
	}
	return info, nil
}

// ForceReleaseKind implements driver.KindForceReleaser: it deletes the keys
// of the read-write lock's or semaphore's live holds, each only while it is
// the key that was read (a hold that ended since, and a waiter's key in its
// place, are left alone). The waiters' keys stay: each sees the keys before
// it go, as after releases, and holds in its turn.
func (d *etcdDriver) ForceReleaseKind(ctx context.Context, name string, kind driver.Kind, tokens []uint64) error {
	_, holders, err := d.kindHolders(ctx, name, kind)
	for _, kv := range holders {
		if err != nil {
			break
		}
		if len(tokens) > 0 && !slices.Contains(tokens, uint64(kv.CreateRevision)) {
			continue
		}
		_, err = d.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).Commit()
	}
	if err != nil {
		return permErr(fmt.Errorf("etcdlock: force release %q: %w", name, err), d.prefix)
	}
	return nil
}

var _ driver.KindForceReleaser = (*etcdDriver)(nil)
