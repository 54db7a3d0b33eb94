package memlock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/memlock"
)

type harness struct{ url string }

func (h *harness) NewClient(ctx context.Context) (*dlock.Client, error) {
	return dlock.Open(ctx, h.url)
}

func (h *harness) Cut(_ context.Context, c *dlock.Client) error {
	var d *memlock.Driver
	if !c.As(&d) {
		return fmt.Errorf("not a memlock client")
	}
	d.Cut()
	return nil
}

func (h *harness) Caps() drivertest.Caps {
	return drivertest.Caps{TTL: 300 * time.Millisecond, Slack: 50 * time.Millisecond, StoreReentrant: true,
		List: drivertest.ListCaps{Labels: true, TTL: true}}
}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(ctx context.Context, t *testing.T) (drivertest.Harness, error) {
		return &harness{url: "mem://" + t.Name()}, nil
	})
}

func TestPrivateStores(t *testing.T) {
	ctx := t.Context()
	a, b := memlock.Open(), memlock.Open()
	defer a.Close()
	defer b.Close()
	la, err := a.Mutex("x").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Unlock(ctx)
	lb, err := b.Mutex("x").TryLock(ctx)
	if err != nil {
		t.Fatalf("private stores share locks: %v", err)
	}
	defer lb.Unlock(ctx)
}

func TestBadURL(t *testing.T) {
	for _, u := range []string{"mem://x/path", "mem://x?a=b"} {
		if _, err := dlock.Open(t.Context(), u); err == nil {
			t.Errorf("Open(%q) succeeded", u)
		}
	}
}
