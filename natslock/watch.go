package natslock

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go/jetstream"
)

// subscription wakes a waiter when the lock's key is purged, deleted or
// expires: a KV watch of the one key, from new updates on.
type subscription struct {
	w      jetstream.KeyWatcher
	cancel context.CancelFunc // ends nats.go's goroutine that waits on the watch's ctx
	c      chan struct{}
	done   chan struct{}
	once   sync.Once
}

// Subscribe implements driver.Notifier. The watch's consumer exists when
// it returns, so a release after it is seen.
func (d *natsDriver) Subscribe(ctx context.Context, name string) (driver.Subscription, error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w, err := d.kv.Watch(wctx, key(name), jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("natslock: watch %q: %w", name, d.noteErr(err))
	}
	s := &subscription{w: w, cancel: cancel, c: make(chan struct{}, 1), done: make(chan struct{})}
	go s.run()
	return s, nil
}

func (s *subscription) run() {
	defer close(s.done)
	for e := range s.w.Updates() {
		if e == nil {
			continue // the end of the (absent) initial values
		}
		if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
			select {
			case s.c <- struct{}{}:
			default:
			}
		}
	}
}

func (s *subscription) C() <-chan struct{} { return s.c }

// Close stops the watch and waits for its goroutine.
func (s *subscription) Close() error {
	var err error
	s.once.Do(func() {
		err = s.w.Stop()
		s.cancel()
		<-s.done
	})
	return err
}

// List implements driver.Lister: the bucket's mutex keys under prefix, in
// name order. Names are stored encoded, so every key is read.
func (d *natsDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := d.kv.Watch(ctx, mutexPrefix+">", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("natslock: list: %w", d.noteErr(err))
	}
	defer func() { _ = w.Stop() }()
	var out []driver.Info
	for {
		select {
		case e := <-w.Updates():
			if e == nil { // all current values seen
				sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
				return out, nil
			}
			name, ok := nameOf(e.Key())
			if !ok || !strings.HasPrefix(name, prefix) {
				continue
			}
			if info := describe(name, e); info.Held {
				out = append(out, info)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("natslock: list: %w", ctx.Err())
		}
	}
}
