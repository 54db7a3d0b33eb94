package zklock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/notify"
	"github.com/go-zookeeper/zk"
)

// Elections (driver.Elector) have the layout of Apache Curator's
// LeaderLatch: the election NAME is the node <chroot>/NAME, a candidate
// creates a protected EPHEMERAL_SEQUENTIAL child _c_<guid>-latch-<sequence>
// whose data is its value (Curator's participant id), and the lowest
// sequence leads; each waiting candidate watches the one just before it.
// Curator's LeaderLatch candidates and dlock's thus elect one leader, and
// LeaderLatch.getLeader returns dlock's leader's value. The term is the
// leader node's czxid. A candidate is a lock attempt (the same creation,
// waiting, renewal and clean-up) whose node is named latch- instead of lock-;
// dlock orders the two kinds together, so an election and a lock of one name
// are one queue (Curator's recipes would each see only their own): do not
// use one name for both. Proclaim is not offered (see Proclaim).

// latchInfix names an election candidate's node, as Curator's LeaderLatch.
const latchInfix = "latch-"

// campaignValue is the context key of a campaign's value.
type campaignValue struct{}

// candidate makes a an election candidate if ctx carries a campaign's value.
func (a *attempt) candidate(ctx context.Context) {
	if v, ok := ctx.Value(campaignValue{}).(string); ok {
		a.kind, a.data = latchInfix, []byte(v)
	}
}

// Campaign implements driver.Elector: a lock attempt with a latch- node
// whose data is value.
func (d *zkDriver) Campaign(ctx context.Context, r driver.Request, value string) (driver.Grant, error) {
	return d.Acquire(context.WithValue(ctx, campaignValue{}, value), r)
}

// Proclaim implements driver.Elector: it refuses with ErrUnsupported. A
// LeaderLatch participant's id is fixed, and rewriting the leader node's
// data would fire the watch Curator's next candidate keeps on that node,
// which it does not set again for a data change: it would then miss the
// node's deletion and never take the lead (TestCuratorLeaderLatchInterop
// saw it).
func (d *zkDriver) Proclaim(ctx context.Context, h driver.Held, value string) error {
	return fmt.Errorf("%w: a ZooKeeper LeaderLatch participant's id is fixed for its term (resign and campaign again)", dlock.ErrUnsupported)
}

// Leader implements driver.Elector: the data and czxid of the first child.
func (d *zkDriver) Leader(ctx context.Context, name string) (driver.Leader, error) {
	node, stat, data, _, err := d.holder(ctx, name)
	if err != nil {
		return driver.Leader{}, fmt.Errorf("zklock: leader %q: %w", name, err)
	}
	if node == "" || stat == nil {
		return driver.Leader{}, nil
	}
	return driver.Leader{Held: true, Value: string(data), Term: uint64(stat.Czxid)}, nil
}

// WatchLeader implements driver.Elector with a watch on the election's
// children and one on the first child's data.
func (d *zkDriver) WatchLeader(ctx context.Context, name string) (driver.Subscription, error) {
	path, err := d.lockPath(name)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	arm := func() ([]<-chan zk.Event, error) {
		var (
			names []string
			ch    <-chan zk.Event
		)
		_, err := d.call(wctx, nil, func() (err error) { names, _, ch, err = d.conn.ChildrenW(path); return err })
		if errors.Is(err, zk.ErrNoNode) { // no candidate yet: wait for the node
			_, err = d.call(wctx, nil, func() (err error) { _, _, ch, err = d.conn.ExistsW(path); return err })
			return []<-chan zk.Event{ch}, err
		}
		if err != nil {
			return nil, err
		}
		chs := []<-chan zk.Event{ch}
		if kids := sortLockChildren(names); len(kids) > 0 {
			var dch <-chan zk.Event
			_, err := d.call(wctx, nil, func() (err error) { _, _, dch, err = d.conn.GetW(path + "/" + kids[0]); return err })
			if err == nil {
				chs = append(chs, dch)
			} // gone already: the children watch fires
		}
		return chs, nil
	}
	chs, err := arm()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("zklock: watch leader %q: %w", name, err)
	}
	return notify.Go(cancel, func(w *notify.Sub) {
		for {
			var data <-chan zk.Event
			if len(chs) > 1 {
				data = chs[1]
			}
			select {
			case <-chs[0]:
			case <-data:
			case <-wctx.Done():
				return
			}
			w.Send()
			for {
				if chs, err = arm(); err == nil {
					break
				}
				select { // connection loss: Observe polls meanwhile
				case <-wctx.Done():
					return
				case <-d.life.Done():
					return
				default:
				}
				if d.pause(wctx, nil) != nil {
					return
				}
			}
			w.Send() // a change while re-arming is seen by the read that follows
		}
	}), nil
}
