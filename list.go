package dlock

import (
	"context"
	"fmt"

	"github.com/dlock/dlock/driver"
)

// List describes every lock held now whose name starts with prefix ("" for
// all), in name order, as Inspect would each. It is for operators (dlock ls,
// dlock top): on a store with many locks it reads them all. Backends that
// cannot enumerate their locks return an error wrapping ErrUnsupported that
// says why.
func (c *Client) List(ctx context.Context, prefix string) ([]Info, error) {
	if ctx == nil {
		return nil, c.e.Wrap("list", prefix, ErrNilContext)
	}
	if c.e.Closed() {
		return nil, c.e.Wrap("list", prefix, ErrClosed)
	}
	l, ok := c.e.Driver().(driver.Lister)
	if !ok {
		return nil, c.e.Wrap("list", prefix, fmt.Errorf("%w: the %s backend cannot enumerate its locks", ErrUnsupported, c.obs.scheme))
	}
	ds, err := l.List(ctx, prefix)
	if err != nil {
		return nil, c.e.Wrap("list", prefix, err)
	}
	out := make([]Info, len(ds))
	for i, d := range ds {
		out[i] = Info(d)
	}
	return out, nil
}
