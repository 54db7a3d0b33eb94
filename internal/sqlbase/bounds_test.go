package sqlbase

import (
	"testing"
	"time"
)

func TestBounds(t *testing.T) {
	for _, c := range []struct {
		ttl        time.Duration
		ms, s      int64
		ka, userTO time.Duration
	}{
		{time.Millisecond, 1, 1, time.Second, time.Second},
		{1500 * time.Millisecond, 1500, 2, time.Second, 1500 * time.Millisecond},
		{30 * time.Second, 30000, 30, 10 * time.Second, 30 * time.Second},
	} {
		k := KeepaliveFor(c.ttl)
		if IdleMillis(c.ttl) != c.ms || IdleSeconds(c.ttl) != c.s || k.Idle != c.ka || k.UserTimeout != c.userTO {
			t.Errorf("TTL %v: %d ms, %d s, %+v", c.ttl, IdleMillis(c.ttl), IdleSeconds(c.ttl), k)
		}
	}
}

func TestTxIdle(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		2 * time.Second:  2 * time.Second,
		MaxTxIdle:        MaxTxIdle,
		30 * time.Second: MaxTxIdle, // dlock.DefaultTTL
		time.Hour:        MaxTxIdle,
	} {
		if got := TxIdle(ttl); got != want {
			t.Errorf("TxIdle(%v) = %v, want %v", ttl, got, want)
		}
	}
}
