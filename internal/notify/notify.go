// Package notify is the driver.Subscription of the backends whose change
// feed is one goroutine of their own (etcd's watch, ZooKeeper's watches):
// the goroutine sends, without blocking, on a channel of one; Close stops it
// and waits for it to return.
package notify

import "context"

// Sub is a driver.Subscription fed by one goroutine.
type Sub struct {
	ch     chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

// Go runs feed on a goroutine of its own and returns its subscription.
// feed reports each change with Send and returns when the context that
// cancel cancels ends; Close calls cancel and waits for feed to return.
func Go(cancel context.CancelFunc, feed func(s *Sub)) *Sub {
	s := &Sub{ch: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		feed(s)
	}()
	return s
}

// Send reports a change: C then has a value, unless one is already waiting
// to be read (a subscriber reads the state again, once, for any number of
// changes).
func (s *Sub) Send() {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// C implements driver.Subscription.
func (s *Sub) C() <-chan struct{} { return s.ch }

// Close implements driver.Subscription: it stops the feed and waits for it.
func (s *Sub) Close() error {
	s.cancel()
	<-s.done
	return nil
}
