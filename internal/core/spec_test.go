package core

import (
	"errors"
	"testing"

	"github.com/dlock/dlock/driver"
)

func TestKindFor(t *testing.T) {
	for _, c := range []struct {
		ask, holding driver.Kind
		held         bool
		want         driver.Kind
		err          error
	}{
		{ask: driver.Exclusive, want: driver.Exclusive},
		{ask: driver.Permit, want: driver.Permit},
		{ask: driver.Shared, holding: driver.Write, held: false, want: driver.Shared},
		{ask: driver.Shared, holding: driver.Write, held: true, want: driver.Write}, // a writer reads under its write hold
		{ask: driver.Write, holding: driver.Shared, held: false, want: driver.Write},
		{ask: driver.Write, holding: driver.Shared, held: true, err: ErrUpgrade}, // the upgrade would deadlock
	} {
		asked := false
		got, err := Spec{Name: "n", Kind: c.ask}.KindFor(func(k driver.Kind) bool {
			asked = true
			if k != c.holding {
				t.Errorf("%v: asked whether the owner holds %v; want %v", c.ask, k, c.holding)
			}
			return c.held
		})
		if !errors.Is(err, c.err) || err == nil && got != c.want {
			t.Errorf("%v with %v held %v: %v, %v; want %v, %v", c.ask, c.holding, c.held, got, err, c.want, c.err)
		}
		if fam := c.ask.Family(); asked != (fam == driver.FamilyRWMutex) {
			t.Errorf("%v: holds called %v", c.ask, asked)
		}
	}
}

func TestQueueKeyPerFamily(t *testing.T) {
	keys := map[string]driver.Kind{}
	for _, k := range []driver.Kind{driver.Exclusive, driver.Shared, driver.Permit} {
		key := Spec{Name: "n", Kind: k}.QueueKey()
		if other, dup := keys[key]; dup {
			t.Errorf("%v and %v share the wait queue %q", k, other, key)
		}
		keys[key] = k
	}
	if r, w := (Spec{Name: "n", Kind: driver.Shared}).QueueKey(), (Spec{Name: "n", Kind: driver.Write}).QueueKey(); r != w {
		t.Errorf("readers queue at %q, writers at %q; want one queue per read-write lock", r, w)
	}
}

func TestCheckReentry(t *testing.T) {
	if err := (Spec{Kind: driver.Permit, Limit: 3}).CheckReentry(2); !errors.Is(err, driver.ErrLimitMismatch) {
		t.Errorf("permit of 3 re-entering one of 2: %v; want ErrLimitMismatch", err)
	}
	if err := (Spec{Kind: driver.Permit, Limit: 2}).CheckReentry(2); err != nil {
		t.Errorf("same count: %v", err)
	}
	if err := (Spec{Kind: driver.Exclusive}).CheckReentry(0); err != nil {
		t.Errorf("exclusive: %v", err)
	}
}
