package memcachedlock_test

import (
	"errors"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	_ "github.com/dlock/dlock/memcachedlock"
)

func TestElectionUnsupported(t *testing.T) {
	ctx := t.Context()
	srv := testserver.Memcached(t)
	c, err := dlock.Open(ctx, "memcached://"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Election("e").Campaign(ctx, "v")
	if !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("Campaign on memcached: %v, want ErrUnsupported", err)
	}
	t.Log(err)
}
