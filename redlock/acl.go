package redlock

import (
	"errors"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/redisnode"
)

// refused returns a permission error (see redisnode.PermissionError) when
// so many nodes refused a right that no majority can answer, else nil: a
// missing grant then fails the call at once, naming the right, instead of
// reading as a lock held by another owner.
func (d *redlockDriver) refused(errs []error) error {
	var first error
	n := 0
	for _, e := range errs {
		if p := redisnode.PermissionError(e, d.prefix); e != nil && errors.Is(p, dlock.ErrInvalidConfig) {
			n++
			if first == nil {
				first = p
			}
		}
	}
	if n > len(errs)-d.quorum {
		return first
	}
	return nil
}
