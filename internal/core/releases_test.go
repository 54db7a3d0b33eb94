package core

import (
	"context"
	"errors"
	"testing"

	"github.com/dlock/dlock/driver"
)

func TestAwaitWaitsForTheLatestRelease(t *testing.T) {
	var s Releases[string]
	never := make(chan struct{})
	if err := s.Await(t.Context(), "k", never); err != nil {
		t.Fatalf("Await with no release under way: %v", err)
	}
	var first, second Release
	s.Begin("k", &first)
	s.Begin("k", &second) // a later hold of the key, detached while the first is released
	done := make(chan error, 1)
	go func() { done <- s.Await(t.Context(), "k", never) }()
	s.End("k", &first)
	s.End("k", &second)
	if err := <-done; err != nil {
		t.Fatalf("Await: %v", err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("%d releases left after both ended", n)
	}
}

func TestAwaitGivesUp(t *testing.T) {
	var s Releases[string]
	var r Release
	s.Begin("k", &r)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Await(ctx, "k", make(chan struct{})); !errors.Is(err, context.Canceled) {
		t.Errorf("Await with ctx ended: %v; want context.Canceled", err)
	}
	closed := make(chan struct{})
	close(closed)
	if err := s.Await(t.Context(), "k", closed); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Await with the client closed: %v; want ErrClosed", err)
	}
	s.End("k", &r)
}
