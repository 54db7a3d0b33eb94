// Package slots bounds how many connections the SQL backends hold for
// row- and session-mode locks.
package slots

import (
	"context"
	"fmt"

	"github.com/dlock/dlock/driver"
)

// Slots is a counting semaphore of held connections.
type Slots chan struct{}

// New returns n slots.
func New(n int) Slots { return make(Slots, n) }

// Take takes a slot: at once, or, with wait, when one frees or ctx ends. It
// reports false, without error, when none was free and wait is false.
func (s Slots) Take(ctx context.Context, wait bool) (bool, error) {
	select {
	case s <- struct{}{}:
		return true, nil
	default:
	}
	if !wait {
		return false, nil
	}
	select {
	case s <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Give returns a slot taken with Take.
func (s Slots) Give() { <-s }

// Full returns the error of a Take that got no slot (cause is Take's
// error, nil for a Take without wait): it says that every slot holds a
// lock of this client, and matches driver.ErrNotAcquired. Without it, a
// client out of slots said "held by another owner" of a free lock.
func (s Slots) Full(cause error) error { return &fullError{n: cap(s), cause: cause} }

type fullError struct {
	n     int
	cause error
}

func (e *fullError) Error() string {
	msg := fmt.Sprintf("lock not acquired: all %d connections of max_held hold this client's locks (raise max_held, and the pool's size if it bounds them)", e.n)
	if e.cause != nil {
		msg += " (" + e.cause.Error() + ")"
	}
	return msg
}

func (e *fullError) Is(target error) bool { return target == driver.ErrNotAcquired }
