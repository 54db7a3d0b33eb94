// Package refused tells a backend's Open, while it waits for its client
// library to connect, that every address it was given refused a connection
// (nothing listens there) and none accepted one. Client libraries retry a
// refused dial (go-redis with a backoff, for Sentinel past Open's ctx;
// go-zookeeper round after round of its servers), and then report the
// ctx's deadline ("no answer"), not the refusal.
package refused

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
)

// Dials watches the dials of one Open. A nil *Dials watches nothing.
type Dials struct {
	want   []string // the addresses, as the library dials them
	notify func(error)
	off    atomic.Bool

	mu       sync.Mutex
	seen     []string // addresses of want that refused
	accepted bool
}

// New watches dials of want (as the client library spells the addresses it
// dials) and calls notify once every one has refused and none accepted,
// with the last refusal.
func New(want []string, notify func(error)) *Dials {
	return &Dials{want: want, notify: notify}
}

// Note records the result of a dial of addr.
func (d *Dials) Note(addr string, err error) {
	if d == nil || d.off.Load() || !slices.Contains(d.want, addr) {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err == nil:
		d.accepted = true
		return
	case !errors.Is(err, syscall.ECONNREFUSED) || d.accepted:
		return
	case !slices.Contains(d.seen, addr):
		d.seen = append(d.seen, addr)
	}
	if len(d.seen) < countDistinct(d.want) {
		return
	}
	if len(d.seen) > 1 {
		err = fmt.Errorf("all %d addresses refused the connection; the last: %w", len(d.seen), err)
	}
	d.off.Store(true) // once
	d.notify(err)
}

// Stop ends the watch (once Open succeeded: later refusals are the
// client's to retry).
func (d *Dials) Stop() {
	if d != nil {
		d.off.Store(true)
	}
}

func countDistinct(s []string) int {
	c := slices.Clone(s)
	slices.Sort(c)
	return len(slices.Compact(c))
}
