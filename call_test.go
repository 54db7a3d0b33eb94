package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/memlock"
)

// TestCallHook checks that Hooks.Call wraps Lock, TryLock, Extend and
// Unlock: each call begins with it, goes on with the ctx it returns (the
// Acquired and Released hooks see that ctx), and ends it with the token and
// the call's error.
func TestCallHook(t *testing.T) {
	type key struct{}
	var log []string
	c := memlock.Open(dlock.WithHooks(dlock.Hooks{
		Call: func(ctx context.Context, call dlock.Call) (context.Context, func(uint64, error)) {
			log = append(log, fmt.Sprintf("begin %s %s %s %s %d", call.Op, call.Backend, call.Name, call.Kind, call.Token))
			return context.WithValue(ctx, key{}, call.Op), func(token uint64, err error) {
				log = append(log, fmt.Sprintf("end %s %d %v", call.Op, token, errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, dlock.ErrNotHeld)))
			}
		},
		Acquired: func(ctx context.Context, e dlock.Event) {
			log = append(log, fmt.Sprintf("acquired in %v, kind %s", ctx.Value(key{}), e.Kind))
		},
		Released: func(ctx context.Context, e dlock.Event) {
			log = append(log, fmt.Sprintf("released in %v, kind %s", ctx.Value(key{}), e.Kind))
		},
	}))
	defer c.Close()
	ctx := t.Context()
	m := c.Mutex("orders/7")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = m.TryLock(ctx)
	_ = l.Extend(ctx, time.Minute)
	_ = l.Unlock(ctx)
	_ = l.Unlock(ctx)
	want := []string{
		"begin lock mem orders/7 exclusive 0", "acquired in lock, kind exclusive", "end lock 1 false",
		"begin trylock mem orders/7 exclusive 0", "end trylock 0 true",
		"begin extend mem orders/7 exclusive 1", "end extend 1 false",
		"begin unlock mem orders/7 exclusive 1", "released in unlock, kind exclusive", "end unlock 1 false",
		"begin unlock mem orders/7 exclusive 1", "end unlock 1 true",
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
}
