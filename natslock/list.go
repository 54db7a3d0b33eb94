package natslock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dlock/dlock/driver"
	"github.com/nats-io/nats.go/jetstream"
)

// List implements driver.Lister: the bucket's mutex keys under prefix, in
// name order, an election's term marked as one. Names are stored encoded,
// so every key is read.
func (d *natsDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	ctx, cancel := d.bind(ctx)
	defer cancel()
	w, err := d.kv.Watch(ctx, mutexPrefix+">", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("natslock: list: %w", d.closedErr(d.noteErr(err)))
	}
	defer stopWatch(w)
	var out []driver.Info
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok { // the connection closed
				return nil, fmt.Errorf("natslock: list: %w", d.closedErr(errors.New("the watch ended")))
			}
			if e == nil { // all current values seen
				sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
				return out, nil
			}
			name, ok := nameOf(e.Key())
			if !ok || !strings.HasPrefix(name, prefix) {
				continue
			}
			if info := describe(name, e); info.Held {
				info.Election = driver.IsElectionOwner(info.Owner) // a portable election's term
				out = append(out, info)
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("natslock: list: %w", d.closedErr(ctx.Err()))
		}
	}
}
