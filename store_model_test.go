package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/keepalive"
)

// TestClientNeverBelievesPastStore drives leases through a store whose
// writes (renewals and Extends) are applied and answered in random orders
// and delays — answered at once, applied and answered late, applied with
// the answer lost, lost before being applied — while Extends of random
// TTLs (shorter and longer) run concurrently with the watchdog, and checks
// at every sample, with the store frozen, that no live hold's expiry in the
// client is later than the store's expiry of it.
func TestClientNeverBelievesPastStore(t *testing.T) {
	const ttl = 300 * time.Millisecond
	d := newFake()
	write := func(ctx context.Context, batch []driver.Held) []driver.RenewResult {
		pause := func() bool {
			select {
			case <-time.After(time.Duration(rand.N(int64(ttl)))):
				return true
			case <-ctx.Done():
				return false
			}
		}
		failed := func() []driver.RenewResult {
			res := make([]driver.RenewResult, len(batch))
			for i := range res {
				res[i].Err = errFakeCut
			}
			return res
		}
		switch rand.N(6) {
		case 0, 1: // applied and answered at once
			return storeRenew(d, batch)
		case 2: // applied, answered late (or not, if given up on)
			res := storeRenew(d, batch)
			if !pause() {
				return failed()
			}
			return res
		case 3: // sent late, applied, answered
			if !pause() {
				return failed()
			}
			return storeRenew(d, batch)
		case 4: // applied, the answer lost
			storeRenew(d, batch)
			return failed()
		default: // lost on the way
			return failed()
		}
	}
	d.renew = write
	c := New(d, "fake", quiet())
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()

	var mu sync.Mutex
	live := map[*Lease]bool{}
	violations := 0
	check := func() {
		mu.Lock()
		ls := make([]*Lease, 0, len(live))
		for l := range live {
			ls = append(ls, l)
		}
		mu.Unlock()
		d.mu.Lock() // the store frozen: no write applies while we look
		defer d.mu.Unlock()
		now := time.Now()
		c.e.Sched().Snapshot(func(state func(*keepalive.Entry) keepalive.State) {
			for _, l := range ls {
				h := l.hold()
				st := state(h.Entry())
				if st.Removed {
					continue
				}
				sl, ok := d.locks[h.Name()]
				var storeExp time.Time
				if ok && sl.token == h.Token() {
					storeExp = sl.expires
				} else {
					storeExp = now // gone from the store: the client must know it has expired
				}
				if st.Expiry.After(storeExp) && violations < 5 {
					violations++
					t.Errorf("%s (token %d): client expiry %v after the store's (%v left in the store)",
						h.Name(), h.Token(), st.Expiry.Sub(storeExp).Round(time.Microsecond), storeExp.Sub(now).Round(time.Microsecond))
				}
			}
		})
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex(fmt.Sprint("model/", i), WithTTL(ttl))
			for ctx.Err() == nil {
				l, err := m.Lock(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				live[l] = true
				mu.Unlock()
				for range rand.N(8) {
					if l.Err() != nil {
						break
					}
					ectx, ecancel := context.WithTimeout(ctx, ttl)
					_ = l.Extend(ectx, time.Duration(50+rand.N(int64(2*ttl/time.Millisecond)))*time.Millisecond)
					ecancel()
					time.Sleep(time.Duration(rand.N(int64(ttl / 3))))
				}
				if err := l.Unlock(context.Background()); err != nil && !errors.Is(err, ErrLeaseLost) && !errors.Is(err, errFakeCut) {
					t.Errorf("Unlock: %v", err)
				}
				mu.Lock()
				delete(live, l)
				mu.Unlock()
			}
		}()
	}
	samples := 0
	for ctx.Err() == nil {
		check()
		samples++
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	t.Logf("%d samples", samples)
}
