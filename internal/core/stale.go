package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlock/dlock/driver"
)

// staleGrants paces and counts the grants of one Lock that came too late to
// be safe (see Engine.grant). Each was released; the next attempt waits a
// capped exponential backoff with jitter, as a poll does, so that a TTL the
// grants can never meet (a slow store, a starved process, a lease the store
// keeps shorter than the TTL) costs a few store calls a second, not a tight
// loop. If the wait ends before a safe grant, the error says that grants came
// and were too late, not that another owner held the lock.
type staleGrants struct {
	n       int           // grants refused as too late
	backoff time.Duration // the next pause
	last    error         // the last refusal, wrapping errStaleGrant
}

// pause counts the refused grant err and waits before the next attempt. It
// returns nil when the attempt may go ahead, or the error Lock returns when
// ctx ended or the client closed during the pause.
func (s *staleGrants) pause(ctx context.Context, e *Engine, err error) error {
	s.n++
	s.last = err
	if s.backoff == 0 {
		s.backoff = pollMin
	}
	d := jitter(s.backoff)
	s.backoff = min(s.backoff*2, PollMax)
	e.log.Debug("dlock: retrying after a grant that came too late", "backend", e.cfg.Scheme, "refused", s.n, "pause", d, "why", err)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
	case <-e.closing.Done():
		return driver.ErrClosed
	}
	return &staleError{n: s.n, last: s.last, err: e.waitErr(ctx, ctx.Err()), every: true}
}

// explain adds what the too-late grants were to err, the error of a Lock
// whose wait ended (ctx, or a refusal) after some; err itself when there
// were none, or when err is of another kind (a closed client, an invalid
// request), which the grants did not cause.
func (s *staleGrants) explain(err error) error {
	var already *staleError
	if s.n == 0 || err == nil || errors.Is(err, driver.ErrClosed) || errors.As(err, &already) || permanent(err) {
		return err
	}
	return &staleError{n: s.n, last: s.last, err: err}
}

// staleError is the error of a Lock whose wait ended after grants that came
// too late. It matches ErrNotAcquired (nothing was acquired), errStaleGrant
// and the wait's own error, but does not say that another owner held the
// lock: there may have been none.
type staleError struct {
	n     int
	last  error // wraps errStaleGrant, with what the last grant had left
	err   error // why the wait ended
	every bool  // the wait ended while pausing after a too-late grant
}

func (e *staleError) Error() string {
	what := fmt.Sprintf("%d grants arrived too late to be safe and were released before the wait ended", e.n)
	if e.every {
		what = fmt.Sprintf("every grant (%d) arrived too late to be safe and was released", e.n)
	}
	return fmt.Sprintf("dlock: lock not acquired: %s (the last: %v; is the TTL more than the store keeps a hold, or the process or store too slow for it?): %v",
		what, strings.TrimPrefix(e.last.Error(), "dlock: "), e.err)
}

// Unwrap returns driver.ErrNotAcquired, the wait's error and the last refusal.
func (e *staleError) Unwrap() []error { return []error{driver.ErrNotAcquired, e.err, e.last} }
