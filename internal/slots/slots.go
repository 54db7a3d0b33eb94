// Package slots bounds how many connections the SQL backends hold for
// row- and session-mode locks.
package slots

import "context"

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
