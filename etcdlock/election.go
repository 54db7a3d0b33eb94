package etcdlock

import (
	"context"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/notify"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Elections (driver.Elector) have the layout of etcd's client/v3/concurrency
// Election and `etcdctl elect`, which is that of its lock: a candidate puts
// "<prefix><name>/<lease id in hex>" under its session's lease, the key with
// the lowest create revision leads, and its create revision is the term.
// The key's value is the candidate's value alone (no owner id or label), as
// etcd's Election writes it, so `etcdctl elect -l NAME` prints dlock's
// leader and Election.Leader reports etcdctl's. Proclaim rewrites the value
// of the leader's key if its create revision is still the term's. An
// election and a lock of one name are one queue: etcd's own recipes share it
// too.

// campaignValue is the context key of a campaign's value, read by enqueue
// for the key it puts.
type campaignValue struct{}

// keyValue is the value of a contender's key: the campaign's value, or the
// lock holder's owner id and label.
func keyValue(ctx context.Context, r driver.Request) string {
	if v, ok := ctx.Value(campaignValue{}).(string); ok {
		return v
	}
	return holderValue(r.Owner, r.Label)
}

// Campaign implements driver.Elector: a lock acquisition whose key carries value.
func (d *etcdDriver) Campaign(ctx context.Context, r driver.Request, value string) (driver.Grant, error) {
	return d.Acquire(context.WithValue(ctx, campaignValue{}, value), r)
}

// Proclaim implements driver.Elector.
func (d *etcdDriver) Proclaim(ctx context.Context, h driver.Held, value string) error {
	l, ok := h.Handle.(*Lease)
	if !ok {
		return fmt.Errorf("etcdlock: proclaim: %w", dlock.ErrLeaseLost)
	}
	var resp *clientv3.TxnResponse
	_, err := retry(ctx, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).If(l.IsOwner()).Then(clientv3.OpPut(l.Key, value, clientv3.WithIgnoreLease())).Commit()
		return err
	})
	if err != nil {
		return fmt.Errorf("etcdlock: proclaim: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdlock: proclaim: %w: the leader's key is gone", dlock.ErrLeaseLost)
	}
	return nil
}

// Leader implements driver.Elector: the key with the lowest create revision.
func (d *etcdDriver) Leader(ctx context.Context, name string) (driver.Leader, error) {
	kv, _, err := d.first(ctx, d.prefix+name+"/", false)
	if err != nil {
		return driver.Leader{}, fmt.Errorf("etcdlock: leader: %w", err)
	}
	if kv == nil {
		return driver.Leader{}, nil
	}
	return driver.Leader{Held: true, Value: string(kv.Value), Term: uint64(kv.CreateRevision)}, nil
}

// WatchLeader implements driver.Elector with a watch on the election's keys.
func (d *etcdDriver) WatchLeader(ctx context.Context, name string) (driver.Subscription, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.WithoutCancel(ctx)))
	wch := d.cli.Watch(wctx, d.prefix+name+"/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	select {
	case wr, ok := <-wch:
		if !ok || wr.Err() != nil {
			cancel()
			if ok {
				return nil, fmt.Errorf("etcdlock: watch leader: %w", wr.Err())
			}
			return nil, fmt.Errorf("etcdlock: watch leader: %w", context.Cause(wctx))
		}
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	}
	return notify.Go(cancel, func(w *notify.Sub) {
		for range wch { // any change, or an error (the watch then ends): read again
			w.Send()
		}
		w.Send() // the watch ended (no leader, compaction): one more read
	}), nil
}
