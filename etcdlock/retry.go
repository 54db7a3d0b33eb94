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
	pause := retryPause
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err = op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !transient(err) {
			return retried, ended(ctx, err)
		}
		retried = true
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return retried, ended(ctx, err)
		}
		pause = min(2*pause, maxRetryPause)
	}
}

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

// ended returns err, made to wrap ctx's error if ctx has ended.
func ended(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
}

// settled runs op, a put of a contender's key, to its reply even when ctx
// ends meanwhile (within attemptTimeout). A put cut short by ctx may still
// reach etcd and be applied after the delete that undoes it (etcd serves a
// connection's requests concurrently): its key, under a session lease the
// client keeps alive, would hold the lock for good after Lock had
// returned. Once the reply is in, the delete comes after the put.
func settled(ctx context.Context, op func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
	defer cancel()
	return op(ctx)
}
