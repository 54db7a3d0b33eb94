package memlock_test

import (
	"context"
	"testing"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/memlock"
)

func TestList(t *testing.T) {
	name := "list-" + t.Name()
	drivertest.RunList(t, func(ctx context.Context) (*dlock.Client, error) {
		return dlock.Open(ctx, "mem://"+name)
	}, drivertest.ListCaps{Labels: true, TTL: true})
	_ = memlock.Scheme
}
