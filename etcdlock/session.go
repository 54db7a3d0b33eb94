package etcdlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock/dlock/internal/keepalive"
)

// session is one lease, kept alive every TTL/3 and shared by every lock of
// one TTL.
type session struct {
	id     clientv3.LeaseID
	ttl    time.Duration
	lost   chan struct{} // closed when the lease expired or was revoked
	cancel context.CancelFunc
	done   chan struct{} // closed when the keepalive loop ends

	// paused stops the keepalive loop's refreshes, as a paused process
	// would; set only by tests (export_test.go).
	paused atomic.Bool

	mu       sync.Mutex
	safe     time.Time // the lease lives at least until then
	last     time.Time // when the last refresh that succeeded (or the grant) was sent
	holds    map[*Lease]struct{}
	lostOnce sync.Once

	// ended is set when markLost begins, before it frees the slots of
	// the session's holds and closes lost: from then on no hold is
	// tracked, and a pool of key names given back is the lost session's.
	ended atomic.Bool
}

// markLost records that the lease is gone, with every key under it: the
// client's slots for those names are free again, and the keepalive loop
// ends (the driver replaces the session, so Close would not end it). The
// slots are freed before lost is closed: a holder told of the loss (by
// lost, or by a renewal that finds it closed) may at once take the name
// again, and must not find its own lost hold's slot still taken.
func (s *session) markLost() {
	s.lostOnce.Do(func() {
		s.ended.Store(true)
		s.mu.Lock()
		hs := s.holds
		s.holds = nil
		s.mu.Unlock()
		for l := range hs {
			l.release()
		}
		close(s.lost)
		s.cancel()
	})
}

// track records a hold on the session, until it is released.
func (s *session) track(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended.Load() {
		return
	}
	if s.holds == nil {
		s.holds = map[*Lease]struct{}{}
	}
	s.holds[l] = struct{}{}
}

func (s *session) untrack(l *Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holds, l)
}

// newSession grants a lease of ttl and keeps it alive.
func newSession(ctx context.Context, cli *clientv3.Client, ttl time.Duration) (*session, error) {
	var sent time.Time
	var g *clientv3.LeaseGrantResponse
	// A retried grant may leave a lease behind: with no key and no keepalive,
	// etcd expires it after ttl.
	_, err := retry(ctx, func(ctx context.Context) (err error) {
		sent = time.Now()
		g, err = cli.Grant(ctx, int64(ttl/time.Second))
		return err
	})
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	s := &session{id: g.ID, ttl: ttl, lost: make(chan struct{}), cancel: cancel, done: make(chan struct{}),
		safe: sent.Add(ttl), last: sent}
	go s.keepAlive(kctx, cli)
	return s, nil
}

// keepAlive refreshes the lease at dlock's renewal cadence,
// keepalive.RenewInterval (sooner after a failure).
func (s *session) keepAlive(ctx context.Context, cli *clientv3.Client) {
	defer close(s.done)
	wait := keepalive.RenewInterval(s.ttl)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if s.paused.Load() {
			continue
		}
		// A renewal that found the lease short refreshed it (see
		// etcdDriver.validity): wait out the interval from that refresh.
		if d := time.Until(s.lastRefresh().Add(keepalive.RenewInterval(s.ttl))); d > 0 {
			wait = d
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, keepalive.RenewInterval(s.ttl))
		err := s.refresh(rctx, cli)
		cancel()
		switch {
		case err == nil:
			wait = keepalive.RenewInterval(s.ttl)
		case errors.Is(err, errSessionLost) || ctx.Err() != nil:
			return
		default: // uncertain: try again soon; dlock declares loss at the safe expiry
			wait = s.ttl / 10
		}
	}
}

// errSessionLost means etcd no longer knows the session's lease: it expired
// or was revoked, and every key under it is gone.
var errSessionLost = errors.New("etcdlock: session lease expired or revoked")

// refresh sends one keepalive for the lease. The server restarts the lease's
// TTL when it handles the refresh, which is after the refresh was sent: so the
// lease lives at least TTL past the send. It returns errSessionLost (and marks
// the session lost) if etcd no longer has the lease, another error if the
// outcome is unknown.
func (s *session) refresh(ctx context.Context, cli *clientv3.Client) error {
	sent := time.Now()
	resp, err := cli.KeepAliveOnce(ctx, s.id)
	switch {
	case err == nil && resp.TTL > 0:
		s.mu.Lock()
		if t := sent.Add(time.Duration(resp.TTL) * time.Second); t.After(s.safe) {
			s.safe = t
		}
		if sent.After(s.last) {
			s.last = sent
		}
		s.mu.Unlock()
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil:
		s.markLost()
		return errSessionLost
	default:
		return err
	}
}

// lastRefresh is when the last refresh that succeeded (or the grant) was
// sent.
func (s *session) lastRefresh() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// remaining returns how long from now the lease is known to live (negative
// if that moment has passed).
func (s *session) remaining() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Until(s.safe)
}

// validity returns how long past from the lease is known to live.
func (s *session) validity(from time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.safe.Sub(from), time.Millisecond)
}

func (s *session) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// close stops the keepalive and revokes the lease, which deletes its keys.
func (s *session) close(cli *clientv3.Client) {
	s.cancel()
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = cli.Revoke(ctx, s.id)
}
