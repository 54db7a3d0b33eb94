package dlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock/dlock/driver"
	"go.uber.org/goleak"
)

// heldWork runs work under a hold of name on c, as Do or Election.Lead
// does, and returns its result. lease is the hold's lease, for the work.
type heldWork func(ctx context.Context, c *Client, name string, work func(ctx context.Context, lease *Lease) error) error

var heldWorks = []struct {
	name string
	run  heldWork
}{
	{"Do", func(ctx context.Context, c *Client, name string, work func(context.Context, *Lease) error) error {
		return Do(ctx, c.Mutex(name, WithTTL(time.Minute)), work)
	}},
	{"Lead", func(ctx context.Context, c *Client, name string, work func(context.Context, *Lease) error) error {
		return c.Election(name, WithTTL(time.Minute)).Lead(ctx, "v", func(ctx context.Context, t *Term) error {
			return work(ctx, t.Lease())
		})
	}},
}

// What Do and Lead do when the work's hold ends under it (lost, or the
// client closed), when their ctx ends during the work, and when the work
// panics: the work's ctx ends with the cause, the hold is given up even past
// ctx, the result says why, and nothing is left in the store or client.
func TestWorkUnderHold(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	errWork := errors.New("the work's own error")
	for _, hw := range heldWorks {
		t.Run(hw.name+"/lost", func(t *testing.T) {
			d := newFake()
			c := New(d, "fake", quiet())
			defer c.Close()
			var cause error
			err := hw.run(t.Context(), c, "w/lost", func(ctx context.Context, l *Lease) error {
				c.e.Lost(l.hold(), fmt.Errorf("%w: store says another owner has it", ErrLeaseLost))
				<-ctx.Done()
				cause = context.Cause(ctx)
				return errWork
			})
			if !errors.Is(cause, ErrLeaseLost) {
				t.Errorf("the work's ctx ended with cause %v; want ErrLeaseLost", cause)
			}
			if !errors.Is(err, errWork) || !errors.Is(err, ErrLeaseLost) {
				t.Errorf("result = %v; want the work's error joined with ErrLeaseLost", err)
			}
		})
		t.Run(hw.name+"/closed", func(t *testing.T) {
			d := newFake()
			c := New(d, "fake", quiet())
			var cause error
			err := hw.run(t.Context(), c, "w/closed", func(ctx context.Context, l *Lease) error {
				if err := c.Close(); err != nil {
					t.Error(err)
				}
				<-ctx.Done()
				cause = context.Cause(ctx)
				return context.Cause(ctx)
			})
			if !errors.Is(cause, ErrClosed) {
				t.Errorf("the work's ctx ended with cause %v; want ErrClosed", cause)
			}
			if !errors.Is(err, ErrClosed) {
				t.Errorf("result = %v; want ErrClosed", err)
			}
			if o := heldBy(d, "w/closed"); o != "" {
				t.Errorf("the store still has a hold of %q", o)
			}
		})
		t.Run(hw.name+"/ctx", func(t *testing.T) {
			d := newFake()
			c := New(d, "fake", quiet())
			defer c.Close()
			ctx, cancel := context.WithCancel(t.Context())
			err := hw.run(ctx, c, "w/ctx", func(ctx context.Context, l *Lease) error {
				cancel()
				<-ctx.Done()
				if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) || errors.Is(cause, ErrLeaseLost) {
					t.Errorf("the work's ctx ended with cause %v; want context.Canceled", cause)
				}
				return ctx.Err()
			})
			if !errors.Is(err, context.Canceled) || errors.Is(err, ErrLeaseLost) {
				t.Errorf("result = %v; want context.Canceled alone", err)
			}
			if o := heldBy(d, "w/ctx"); o != "" {
				t.Errorf("the store still has a hold of %q after a ctx that ended during the work", o)
			}
			if n, w, holds, freeing := c.e.Leftovers(); n+w+holds+freeing != 0 {
				t.Errorf("left behind: %d owner turns, %d wait lines, %d holds, %d releases", n, w, holds, freeing)
			}
		})
		t.Run(hw.name+"/panic", func(t *testing.T) {
			d := newFake()
			c := New(d, "fake", quiet())
			defer c.Close()
			var workCtx context.Context
			func() {
				defer func() {
					if r := recover(); r != "work panicked" {
						t.Errorf("recovered %v; want the work's panic", r)
					}
				}()
				_ = hw.run(t.Context(), c, "w/panic", func(ctx context.Context, l *Lease) error {
					workCtx = ctx
					panic("work panicked")
				})
			}()
			if workCtx.Err() == nil {
				t.Error("the work's ctx is live after the work panicked")
			}
			if o := heldBy(d, "w/panic"); o != "" {
				t.Errorf("the store still has a hold of %q after the work panicked", o)
			}
			if n, w, holds, freeing := c.e.Leftovers(); n+w+holds+freeing != 0 {
				t.Errorf("left behind: %d owner turns, %d wait lines, %d holds, %d releases", n, w, holds, freeing)
			}
		})
		t.Run(hw.name+"/release-error", func(t *testing.T) {
			d := newFake()
			c := New(d, "fake", quiet())
			defer c.Close()
			err := hw.run(t.Context(), c, "w/cut", func(ctx context.Context, l *Lease) error {
				d.cut.Store(true) // the release fails
				return errWork
			})
			d.cut.Store(false)
			if !errors.Is(err, errWork) || !errors.Is(err, errFakeCut) {
				t.Errorf("result = %v; want the work's error joined with the release's", err)
			}
		})
	}
	_ = driver.ErrClosed
}
