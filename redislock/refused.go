package redislock

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
)

// refusals tells Open, through refused, once every address of the URL has
// refused a connection (nothing listens there) and none has accepted one:
// go-redis retries its dials with a backoff, for Sentinel past Open's ctx,
// and then reports the ctx's deadline ("no answer"), not the refusal.
type refusals struct {
	want    []string // the URL's addresses, as dialed
	refused func(error)
	off     atomic.Bool

	mu       sync.Mutex
	seen     []string // addresses of want that refused
	accepted bool
}

// note records the result of a dial of addr.
func (r *refusals) note(addr string, err error) {
	if r == nil || r.off.Load() || !slices.Contains(r.want, addr) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.accepted = true
		return
	case !errors.Is(err, syscall.ECONNREFUSED) || r.accepted:
		return
	case !slices.Contains(r.seen, addr):
		r.seen = append(r.seen, addr)
	}
	if len(r.seen) < len(r.want) {
		return
	}
	if len(r.want) > 1 {
		err = fmt.Errorf("all %d addresses refused the connection; the last: %w", len(r.want), err)
	}
	r.refused(err)
}

// stop ends the watch (once Open succeeded: later refusals are the
// client's to retry).
func (r *refusals) stop() {
	if r != nil {
		r.off.Store(true)
	}
}
