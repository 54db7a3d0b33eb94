package natslock_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// A server that accepts and never answers ends Open at its ctx's deadline,
// not at nats.go's own 5 s handshake timeout: nats.Connect takes no ctx,
// and Open gave it 5 s whatever ctx said (dlock --connect-timeout 500ms
// took 5 s).
func TestOpenSilentServerEndsAtDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				_ = c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // kept open, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := dlock.Open(ctx, "nats://"+ln.Addr().String()+"/silent")
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of a silent server succeeded")
	}
	// 5 s is nats.go's own timeout, which Open used to wait out; anything
	// well below it shows the deadline was followed, on a loaded machine too.
	if waited := time.Since(start); waited >= 4*time.Second {
		t.Errorf("Open with 300 ms left waited %v: %v", waited, err)
	}
}

// With several silent servers, Open still ends at its ctx's deadline: the
// time left is shared by the servers, which nats.go tries one after another
// (each had all of it, and four took four times the deadline).
func TestOpenSilentServersEndAtDeadline(t *testing.T) {
	var hosts []string
	for range 4 {
		silent := testserver.NewProxy(t, "127.0.0.1:1")
		silent.Blackhole() // accepts, never answers
		hosts = append(hosts, silent.Addr())
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	c, err := dlock.Open(ctx, "nats://"+strings.Join(hosts, ",")+"/silent")
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of silent servers succeeded")
	}
	// Well below the old 4 s, with room for a loaded machine.
	if waited := time.Since(start); waited >= 3*time.Second {
		t.Errorf("Open with 1 s left and four silent servers waited %v: %v", waited, err)
	}
}
