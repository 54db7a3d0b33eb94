package dlock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/dlock/dlock/driver"
)

// A held election whose holder has not written its token yet (the SQL
// stores' row and session modes, during a handoff) has no leader yet:
// Leader gave it as term 0, below every earlier term (an adversary pass).
func TestLeaderWithoutTokenIsNoLeader(t *testing.T) {
	d := newFake()
	var reads atomic.Int64
	pending := int64(2) // reads that find the holder without its token
	d.inspect = func(context.Context, string) (driver.Info, error) {
		if reads.Add(1) <= pending {
			return driver.Info{Held: true, Label: "", Notes: []string{"token not written yet"}}, nil
		}
		return driver.Info{Held: true, Label: "v2", Token: 7}, nil
	}
	c := New(d, "fake")
	defer c.Close()
	l, err := c.Election("el").Leader(t.Context())
	if err != nil || l.Term != 7 || l.Value != "v2" {
		t.Fatalf("Leader: %+v, %v; want v2, term 7, once the token is written", l, err)
	}
	reads.Store(0)
	pending = 1 << 30
	if l, err := c.Election("el").Leader(t.Context()); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("Leader: %+v, %v; want ErrNoLeader while the holder has no token", l, err)
	}
}
