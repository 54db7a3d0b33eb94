package memlock

import (
	"context"
	"sort"
	"strings"

	"github.com/dlock/dlock/driver"
)

// List implements driver.Lister.
func (d *Driver) List(_ context.Context, prefix string) ([]driver.Info, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	var names []string
	for name := range s.locks {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	s.mu.Unlock()
	sort.Strings(names)
	out := make([]driver.Info, 0, len(names))
	for _, name := range names {
		if info := s.inspect(name); info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
