package natslock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/natslock"
	"github.com/nats-io/nats.go"
)

// A prefix nats.go accepts but the server cannot use as a subject (an
// empty token: a leading dot, or two dots in a row), one that holds a
// control character or a Unicode space, or one too long for the server's
// control line, is refused at Open with ErrInvalidURL, before any
// connection: never a panic, a hang, an untyped error, or a client whose
// replies never arrive. Blanks and wildcards are refused already
// (TestInboxPrefixURL).
func TestInboxPrefixBadShapes(t *testing.T) {
	url0 := testserver.NATSInProcess(t)
	for _, bad := range []string{"", ".x", "a..b", "x.", "x.>", "a>b", "a*", "x\x00y", "x\vy", "x\fy", "x\x7fy",
		"x\u00a0y", "x\u2028y", "x\xffy", strings.Repeat("p", 257), strings.Repeat("p", 70000)} {
		name := bad
		if len(name) > 20 {
			name = name[:20] + "…"
		}
		t.Run(url.QueryEscape(name), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			u := url0 + "/bad?inbox_prefix=" + url.QueryEscape(bad)
			c, err := dlock.Open(ctx, u)
			if err == nil {
				_ = c.Close()
				t.Fatalf("Open with inbox_prefix %q succeeded", name)
			}
			if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), "inbox_prefix") {
				t.Errorf("Open with inbox_prefix %q: %.300s; want ErrInvalidURL naming inbox_prefix", name, err)
			}
			if len(bad) > 256 && strings.Count(err.Error(), bad) > 1 { // once in the URL dlock names
				t.Errorf("Open with inbox_prefix %q: an error of %d bytes repeats the prefix", name, len(err.Error()))
			}
		})
	}
}

// The longest prefix allowed, and prefixes of several tokens, work: a lock
// is taken, waited for and handed over with replies under the prefix.
func TestInboxPrefixGoodShapes(t *testing.T) {
	url0 := testserver.NATSInProcess(t)
	for _, good := range []string{"_INBOX_A", "app.one.replies", "$x-y_z", strings.Repeat("p", 256)} {
		t.Run(url.QueryEscape(good[:min(len(good), 20)]), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			u := url0 + "/good?inbox_prefix=" + url.QueryEscape(good)
			open := func() *dlock.Client {
				c, err := dlock.Open(ctx, u)
				if err != nil {
					t.Fatalf("Open with inbox_prefix %.20q: %v", good, err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			a, b := open(), open()
			l, err := a.Mutex("good").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l2, err := b.Mutex("good").Lock(ctx)
				if err == nil {
					err = l2.Unlock(ctx)
				}
				got <- err
			}()
			waitQueued(t, ctx, a, "good")
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Errorf("the waiter: %v", err)
			}
		})
	}
}

// A connection given to Open with a prefix that nats.CustomInboxPrefix
// accepts but the server cannot use is refused the same way, wrapping
// ErrInvalidConfig, rather than with nats.go's untyped "invalid subject".
func TestInboxPrefixBadOwnConnection(t *testing.T) {
	url0 := testserver.NATSInProcess(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, bad := range []string{".x", "a..b", "x\x00y", "x\u00a0y", strings.Repeat("p", 257)} {
		nc, err := nats.Connect(url0, nats.CustomInboxPrefix(bad))
		if err != nil {
			t.Fatal(err)
		}
		c, err := natslock.Open(ctx, nc, natslock.Options{Bucket: "own"})
		nc.Close()
		if err == nil {
			_ = c.Close()
			t.Errorf("Open with a connection's inbox prefix %.20q succeeded", bad)
		} else if !errors.Is(err, dlock.ErrInvalidConfig) || !strings.Contains(err.Error(), "inbox prefix") {
			t.Errorf("Open with a connection's inbox prefix %.20q: %v; want ErrInvalidConfig naming the inbox prefix", bad, err)
		}
	}
}
