package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// PostgreSQL's backends leave the postmaster's process group (setsid): a
// pause that signalled only the group froze the postmaster and left every
// open session answering.
func TestPausePostgresSessions(t *testing.T) {
	s := Postgres(t)
	conn, err := pgx.Connect(t.Context(), PostgresURL(s))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	s.Pause()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = conn.Exec(ctx, "SELECT 1")
	cancel()
	s.Resume()
	if err == nil {
		t.Fatal("an open session of a paused server answered")
	}
	conn2, err := pgx.Connect(t.Context(), PostgresURL(s))
	if err != nil {
		t.Fatalf("resumed server: %v", err)
	}
	defer conn2.Close(context.Background())
	if _, err := conn2.Exec(t.Context(), "SELECT 1"); err != nil {
		t.Fatalf("resumed server: %v", err)
	}
}
