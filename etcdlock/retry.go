package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// attemptTimeout bounds one attempt of a request the driver retries. etcd
// answers a write whose proposal was lost with a dead leader only after its
// request timeout (5s plus two election timeouts), and a member without a
// leader holds reads as long: without a bound of its own, one such request
// stalls the lock that long after a leader is killed.
const attemptTimeout = time.Second

// Pauses between retries.
const (
	retryPause    = 20 * time.Millisecond
	maxRetryPause = 500 * time.Millisecond
)

// retry runs op, which must be idempotent, each attempt bounded by
// attemptTimeout, again after failures that a later attempt can mend (no
// leader, a lost proposal, a dead member, the attempt's timeout), until it
// succeeds, fails otherwise, or ctx ends. retried reports that an earlier
// attempt failed with an unknown outcome.
func retry(ctx context.Context, op func(context.Context) error) (retried bool, err error) {
	return retryFrom(ctx, ctx, time.Time{}, op)
}

// retrySettled is retry for a put of a contender's key: each attempt runs
// to its reply even when ctx ends meanwhile (within attemptTimeout). A put
// cut short by ctx may still reach etcd and be applied after the delete
// that undoes it (etcd serves a connection's requests concurrently): its
// key, under a session lease the client keeps alive, would hold the lock
// for good after Lock had returned. Once the reply is in, the delete comes
// after the put.
func retrySettled(ctx context.Context, op func(context.Context) error) (retried bool, err error) {
	return retryFrom(ctx, context.WithoutCancel(ctx), time.Time{}, op)
}

// tryLimit bounds how long a TryLock retries its requests (its put, and
// the lease refresh before its grant): a TryLock must not fail on an etcd
// merely slow (a loaded machine's etcd can take over a second to commit,
// past one attempt's timeout), nor wait long on one that cannot answer.
// It is etcd's own request timeout (5s and two election timeouts), the
// longest a member takes to answer a request it can serve.
const tryLimit = 7 * time.Second

// retrySettledWithin is retrySettled that also gives up once limit has
// passed (a TryLock's put: see tryLimit).
func retrySettledWithin(ctx context.Context, limit time.Duration, op func(context.Context) error) (retried bool, err error) {
	return retryFrom(ctx, context.WithoutCancel(ctx), time.Now().Add(limit), op)
}

// retryWithin is retry that also gives up once limit has passed, as if ctx
// had that deadline too.
func retryWithin(ctx context.Context, limit time.Duration, op func(context.Context) error) (retried bool, err error) {
	return retryFrom(ctx, ctx, time.Now().Add(limit), op)
}

// retryFrom is retry with each attempt's context derived from base (ctx, or
// ctx without its cancellation) and, if until is set, ending by until. The
// attempt's context is the only one made: not one from retry and another
// from settled, nor one for until, whose cost a Lock and an Unlock would
// each pay in garbage.
func retryFrom(ctx, base context.Context, until time.Time, op func(context.Context) error) (retried bool, err error) {
	pause := retryPause
	for {
		deadline := time.Now().Add(attemptTimeout)
		if !until.IsZero() && until.Before(deadline) {
			deadline = until
		}
		actx, cancel := context.WithDeadline(base, deadline)
		err = op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) || passed(until) {
			return retried, ended(ctx, until, err)
		}
		retried = true
		wait := pause
		if !until.IsZero() {
			wait = min(wait, time.Until(until))
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return retried, ended(ctx, until, err)
		}
		if passed(until) {
			return retried, ended(ctx, until, err)
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// passed reports whether until is set and has passed.
func passed(until time.Time) bool { return !until.IsZero() && !time.Now().Before(until) }

// transient reports whether err is one a later attempt can mend.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) { // the attempt's own timeout
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, errSessionLost) {
		return false
	}
	code := status.Code(err)
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Unknown, codes.Aborted,
		codes.ResourceExhausted, codes.Internal:
		return true
	}
	return false
}

// ended returns err, made to wrap ctx's error if ctx has ended, or
// context.DeadlineExceeded if until has passed, as a ctx with that deadline
// would have. err stays visible to errors.Is: a last answer such as "lease
// not found" is certain, and callers act on it.
func ended(ctx context.Context, until time.Time, err error) error {
	end := ctx.Err()
	if end == nil && passed(until) {
		end = context.DeadlineExceeded
	}
	if err == nil || end == nil || errors.Is(err, end) {
		return err
	}
	return fmt.Errorf("%w (last error: %w)", end, err)
}
