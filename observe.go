package dlock

import (
	"context"
	"iter"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/core"
)

// observePoll is how often Observe reads the leader where the store cannot
// tell it of every change (the portable election).
const observePoll = 200 * time.Millisecond

// Leader returns the current leader: its value, label and term. It returns
// an error wrapping ErrNoLeader when there is none.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	c := e.c
	if ctx == nil {
		return Leader{}, c.e.Wrap("leader", e.name, ErrNilContext)
	}
	if e.err != nil {
		return Leader{}, c.e.Wrap("leader", e.name, e.err)
	}
	if c.e.Closed() {
		return Leader{}, c.e.Wrap("leader", e.name, ErrClosed)
	}
	ld, err := e.leader(ctx)
	if err == nil && !ld.Held {
		err = ErrNoLeader
	}
	if err != nil {
		return Leader{}, c.e.Wrap("leader", e.name, err)
	}
	return Leader{Value: ld.Value, Label: ld.Label, Term: ld.Term}, nil
}

func (e *Election) leader(ctx context.Context) (driver.Leader, error) {
	if e.el != nil {
		return e.el.Leader(ctx, e.name)
	}
	for try := 1; ; try++ {
		info, err := e.c.e.Driver().Inspect(ctx, e.name)
		if err != nil {
			return driver.Leader{}, err
		}
		if !info.Held || info.Token != 0 {
			return driver.Leader{Held: info.Held, Value: info.Label, Term: info.Token}, nil
		}
		// Held with no token yet: a new holder that has not written its
		// token (the SQL stores' row and session modes, as Inspect's notes
		// say). Its term has not begun; Leader gave it as term 0, below
		// every earlier term (an adversary pass). Read again, briefly,
		// then say there is no leader yet.
		if try == 3 {
			return driver.Leader{}, nil
		}
		select {
		case <-ctx.Done():
			return driver.Leader{}, ctx.Err()
		case <-time.After(time.Duration(try) * 10 * time.Millisecond):
		}
	}
}

// Observe returns the changes of leader, in order: the leader when it
// starts, then each new term, and each Proclaim of a new value (same Term,
// new Value). Terms come in strictly increasing order and each is reported
// once: a read that finds an older term than one already reported (a
// lagging replica) is dropped. Times without a leader are not reported.
// Store errors are yielded (with a zero Leader) as they happen, and Observe
// goes on after a pause; it ends when ctx ends or the loop breaks.
//
// "None missed" means: Observe reads the leader after every change the
// store tells it of (an etcd watch, ZooKeeper watches on the candidates
// and the leader's node, a release notification where the driver offers
// them: mem, PostgreSQL's table mode), and at least every 200ms on the
// portable election (every 5s on etcd and ZooKeeper). A term that
// begins and ends between two reads — shorter than the store's
// notification delay, or than the poll interval where it has none — is
// not reported; every term that lasts longer is, and no term is reported
// twice or out of order.
func (e *Election) Observe(ctx context.Context) iter.Seq2[Leader, error] {
	return func(yield func(Leader, error) bool) {
		c := e.c
		if ctx == nil {
			yield(Leader{}, c.e.Wrap("observe", e.name, ErrNilContext))
			return
		}
		if e.err != nil {
			yield(Leader{}, c.e.Wrap("observe", e.name, e.err))
			return
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(c.e.Closing(), cancel)
		defer stop()
		var wake <-chan struct{}
		every := observePoll
		var sub driver.Subscription
		var err error
		if e.el != nil {
			sub, err = e.el.WatchLeader(ctx, e.name)
			every = core.WakeMax
		} else if n, ok := c.e.Driver().(driver.Notifier); ok {
			sub, err = n.Subscribe(ctx, e.name)
		}
		if err != nil { // poll instead
			c.e.Log().Debug("dlock: observe: watch failed; polling", "backend", c.obs.scheme, "name", e.name, "err", err)
			every = observePoll
		} else if sub != nil {
			defer sub.Close()
			wake = sub.C()
		}
		var last Leader
		timer := time.NewTimer(0)
		defer timer.Stop()
		pause := core.ErrWait
		for {
			ld, err := e.leader(ctx)
			d := every
			switch {
			case ctx.Err() != nil:
				if c.e.Closing().Err() != nil {
					yield(Leader{}, c.e.Wrap("observe", e.name, ErrClosed))
				}
				return
			case err != nil:
				if !yield(Leader{}, c.e.Wrap("observe", e.name, err)) {
					return
				}
				d, pause = pause, min(pause*2, core.PollMax)
			case ld.Held && (ld.Term > last.Term || ld.Term == last.Term && ld.Value != last.Value):
				pause = core.ErrWait
				last = Leader{Value: ld.Value, Label: ld.Label, Term: ld.Term}
				if !yield(last, nil) {
					return
				}
			default:
				pause = core.ErrWait
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(d)
			select {
			case <-wake:
			case <-timer.C:
			case <-ctx.Done():
				if c.e.Closing().Err() != nil {
					yield(Leader{}, c.e.Wrap("observe", e.name, ErrClosed))
				}
				return
			}
		}
	}
}
