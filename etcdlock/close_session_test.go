package etcdlock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/drivertest"
	"github.com/dlock/dlock/internal/testserver"
)

// Close while a TryLock (whose ctx has no deadline) starts the client's
// session over a network that has gone silent: the session's lease grant is
// retried until ctx ends, so Close, which gives an acquisition under way
// 10 s and then closes the driver to fail it, must still end it and return.
func TestCloseDuringTryLockSessionGrant(t *testing.T) {
	p := testserver.NewProxy(t, testserver.Etcd(t).Addr())
	c := drivertest.MustOpen(t, "etcd://"+p.Addr())
	p.Blackhole()
	try := drivertest.Go(func() (*dlock.Lease, error) { return c.Mutex("silent").TryLock(t.Context()) })
	try.WantPending(t, 500*time.Millisecond, "TryLock over a silent network")
	closed := drivertest.Go(func() (struct{}, error) { return struct{}{}, c.Close() })
	closed.Result(t, 60*time.Second, "Close while a TryLock starts the session")
	if _, err := try.Result(t, 10*time.Second, "TryLock after Close"); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("TryLock after Close = %v; want ErrClosed", err)
	}
}
