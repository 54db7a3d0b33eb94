package memlock

import (
	"context"
	"strings"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
)

// List implements driver.Lister: mutexes (and elections), read-write locks
// and semaphores.
func (d *Driver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	var refs []listing.Ref
	for name := range s.locks {
		if strings.HasPrefix(name, prefix) {
			refs = append(refs, listing.Ref{Name: name, Family: driver.Exclusive})
		}
	}
	for key := range s.kinds {
		for fam, mark := range map[driver.Kind]string{driver.Shared: "\x00rw\x00", driver.Permit: "\x00sem\x00"} {
			if name, ok := strings.CutPrefix(key, mark); ok && strings.HasPrefix(name, prefix) {
				refs = append(refs, listing.Ref{Name: name, Family: fam})
			}
		}
	}
	s.mu.Unlock()
	out, err := listing.Inspect(ctx, refs, listing.For(d))
	for i := range out {
		if out[i].Kind == driver.Exclusive {
			out[i].Notes = append(out[i].Notes, driver.WaitersUncounted("mem waiters poll and keep no queue"))
		}
	}
	return out, err
}
