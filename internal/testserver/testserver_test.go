package testserver

import (
	"context"
	"testing"
	"time"
)

func TestRedisStartStopRestart(t *testing.T) {
	s := Redis(t)
	ctx := t.Context()
	if err := redisReady(ctx, s.Addr()); err != nil {
		t.Fatalf("started server not answering: %v", err)
	}
	s.Stop()
	if err := redisReady(ctx, s.Addr()); err == nil {
		t.Fatal("stopped server still answers")
	}
	if err := s.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := redisReady(ctx, s.Addr()); err != nil {
		t.Fatalf("restarted server not answering: %v", err)
	}
}

func TestPause(t *testing.T) {
	s := Redis(t)
	s.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := redisReady(ctx, s.Addr()); err == nil {
		t.Fatal("paused server answered")
	}
	s.Resume()
	if err := redisReady(t.Context(), s.Addr()); err != nil {
		t.Fatalf("resumed server not answering: %v", err)
	}
}
