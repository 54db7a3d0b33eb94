package sqlbase

import (
	"errors"
	"testing"

	"github.com/dlock/dlock/driver"
)

func TestHeldCap(t *testing.T) {
	for _, c := range []struct {
		mode             string
		maxHeld, poolMax int
		want             int // -1: refused
	}{
		{ModeTable, 16, 1, 16},   // table mode holds no connection
		{ModeRow, 16, 0, 16},     // no bound on the pool
		{ModeRow, 16, 2, 1},      // one for the tokens
		{ModeRow, 16, 1, -1},     // no room for a token
		{ModeSession, 16, 1, 1},  // one lock; the rest waits for it
		{ModeSession, 16, 5, 4},  //
		{ModeSession, 3, 100, 3}, // max_held is the smaller
	} {
		got, err := HeldCap("x", c.mode, c.maxHeld, c.poolMax)
		if c.want < 0 && !errors.Is(err, driver.ErrInvalidConfig) || c.want >= 0 && (err != nil || got != c.want) {
			t.Errorf("HeldCap(%s, %d, pool %d) = %d, %v; want %d", c.mode, c.maxHeld, c.poolMax, got, err, c.want)
		}
	}
}
