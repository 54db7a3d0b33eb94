package core

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// TestLeaseContextMadeAfterEnd: a context asked for after the lease ended
// is already cancelled, with the lease's first cause.
func TestLeaseContextMadeAfterEnd(t *testing.T) {
	lost := errors.New("lost")
	l := &Lease{}
	l.cancel(lost)
	l.cancel(ErrUnlocked) // a later cause does not replace the first
	ctx := l.context()
	select {
	case <-ctx.Done():
	default:
		t.Fatal("context of an ended lease is not done")
	}
	if got := context.Cause(ctx); got != lost {
		t.Fatalf("cause %v, want %v", got, lost)
	}
	if got := l.endCause(); got != lost {
		t.Fatalf("endCause %v, want %v", got, lost)
	}
}

// TestLeaseContextMadeBeforeEnd: a context asked for while the lease is
// live ends with it, and is the same context every time.
func TestLeaseContextMadeBeforeEnd(t *testing.T) {
	l := &Lease{}
	ctx := l.context()
	if ctx != l.context() {
		t.Fatal("a second call made another context")
	}
	if ctx.Err() != nil || l.endCause() != nil {
		t.Fatal("live lease reads as ended")
	}
	l.cancel(ErrUnlocked)
	<-ctx.Done()
	if got := context.Cause(ctx); got != ErrUnlocked {
		t.Fatalf("cause %v, want ErrUnlocked", got)
	}
	var nilLease Lease
	nilLease.cancel(nil)
	if got := nilLease.endCause(); got != context.Canceled {
		t.Fatalf("cancel(nil) stored %v, want context.Canceled", got)
	}
}

// TestLeaseContextRacesEnd: however a first Context and the lease's end
// interleave, every context handed out ends, with the one first cause.
func TestLeaseContextRacesEnd(t *testing.T) {
	for range 2000 {
		l := &Lease{}
		causes := []error{errors.New("a"), errors.New("b")}
		ctxs := make([]context.Context, 4)
		var wg sync.WaitGroup
		for i := range ctxs {
			wg.Go(func() { ctxs[i] = l.context() })
		}
		for _, c := range causes {
			wg.Go(func() { l.cancel(c) })
		}
		wg.Wait()
		first := l.endCause()
		if first != causes[0] && first != causes[1] {
			t.Fatalf("endCause %v, want one of the causes", first)
		}
		for _, ctx := range ctxs {
			if ctx != ctxs[0] {
				t.Fatal("two contexts for one lease")
			}
			select {
			case <-ctx.Done():
			default:
				t.Fatal("a context handed out did not end with its lease")
			}
			if got := context.Cause(ctx); got != first {
				t.Fatalf("context's cause %v, lease's %v", got, first)
			}
		}
	}
}
