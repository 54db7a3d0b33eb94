package slots

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestTakeGive(t *testing.T) {
	s := New(1)
	if ok, err := s.Take(t.Context(), false); !ok || err != nil {
		t.Fatalf("first Take = %v, %v", ok, err)
	}
	if ok, err := s.Take(t.Context(), false); ok || err != nil {
		t.Fatalf("Take with none free = %v, %v; want false, nil", ok, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if ok, err := s.Take(ctx, true); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Take past its deadline = %v, %v", ok, err)
	}
	go func() { time.Sleep(10 * time.Millisecond); s.Give() }()
	if ok, err := s.Take(t.Context(), true); !ok || err != nil {
		t.Fatalf("waiting Take after a Give = %v, %v", ok, err)
	}
}
