package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// A server that accepts and never answers ends Open at its ctx's deadline.
// Open used to take 1 s more: go-zookeeper's Close, on the way out, waits
// up to 1 s for the answer to its close request (dlock --connect-timeout
// 1s took 2 s).
func TestOpenSilentServerEndsAtDeadline(t *testing.T) {
	silent := testserver.NewProxy(t, "127.0.0.1:1")
	silent.Blackhole() // accepts, never answers
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := dlock.Open(ctx, "zk://"+silent.Addr())
	if err == nil {
		_ = c.Close()
		t.Fatal("Open of a silent server succeeded")
	}
	// Well below the old 1.3 s, with room for a loaded machine.
	if waited := time.Since(start); waited >= 1100*time.Millisecond {
		t.Errorf("Open with 300 ms left waited %v: %v", waited, err)
	}
}
