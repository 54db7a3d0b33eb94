package dlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
)

// Two Extends of a fixed lease, both longer than its TTL, that overlap
// (each applied in the store before either is answered) and both succeed:
// the store keeps the lease past its original expiry whichever landed
// last, so the client must too. Reporting both Extends done while the
// lease still ends at its original TTL is the bug drivertest's Extend saw.
func TestOverlappingLongerExtendsBothMoveExpiry(t *testing.T) {
	const ttl = time.Second
	const a, b = 5 * time.Second, 6 * time.Second
	d := newFake()
	var applied sync.WaitGroup
	applied.Add(2)
	d.renew = func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		res := storeRenew(d, batch)
		applied.Done()
		applied.Wait() // answer only once both are applied in the store
		return res
	}
	c := New(d, "fake")
	defer c.Close()
	l, err := c.Mutex("extend/overlap-longer", WithTTL(ttl), WithoutRenewal()).Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	original, _ := clientExpiry(l)
	sent := time.Now()
	errs := make(chan error, 2)
	for _, x := range []time.Duration{a, b} {
		go func() { errs <- l.Extend(t.Context(), x) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	checkNotPastStore(t, d, l)
	exp, _ := clientExpiry(l)
	if want := sent.Add(a); exp.Before(want) {
		t.Errorf("after two Extends that both succeeded the client expiry is %v past the original; want at least %v (the shorter Extend from when it was sent)",
			exp.Sub(original).Round(time.Millisecond), want.Sub(original).Round(time.Millisecond))
	}
	_ = l.Unlock(t.Context())
}
