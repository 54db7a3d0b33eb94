package dlock

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A fixed lease that ends at its TTL says which: the grant's alone, or one
// an Extend set since (the message named only the grant's TTL, which an
// Extend had made wrong).
func TestExpiredMessageSaysExtended(t *testing.T) {
	c := New(newFake(), "fake")
	defer c.Close()
	for _, extend := range []bool{false, true} {
		l, err := c.Mutex("expired-message", WithTTL(100*time.Millisecond), WithoutRenewal()).Lock(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if extend {
			if err := l.Extend(t.Context(), 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		<-l.Done()
		err = l.Err()
		if !errors.Is(err, ErrLeaseLost) || strings.Contains(err.Error(), "then extended") != extend {
			t.Errorf("extended %v: %v", extend, err)
		}
	}
}
