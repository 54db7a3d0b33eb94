package sqlbase

import (
	"context"
	"testing"
	"time"
)

// graceCtx outlives its parent by the grace, no less; keeps its values;
// ends at once when released; and is the parent itself if that has ended.
func TestGraceCtx(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
	g, release := graceCtx(parent, 200*time.Millisecond)
	defer release()
	cancel()
	ended := time.Now()
	if g.Value(key{}) != "v" {
		t.Error("the grace ctx lost its parent's values")
	}
	<-g.Done()
	if d := time.Since(ended); d < 200*time.Millisecond {
		t.Errorf("the grace ctx ended %v after its parent, before its grace", d)
	}

	parent, cancel = context.WithCancel(t.Context())
	defer cancel()
	g, release = graceCtx(parent, time.Hour)
	release()
	select {
	case <-g.Done():
	case <-time.After(10 * time.Second):
		t.Error("a released grace ctx did not end")
	}

	cancel()
	if g, _ := graceCtx(parent, time.Hour); g != parent {
		t.Error("graceCtx of an ended ctx is not that ctx")
	}
}

func TestGrace(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		150 * time.Millisecond: 50 * time.Millisecond,
		3 * time.Second:        time.Second,
		time.Hour:              time.Second,
	} {
		if got := Grace(ttl); got != want {
			t.Errorf("Grace(%v) = %v, want %v", ttl, got, want)
		}
	}
}
