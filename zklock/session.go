package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// session is what the driver knows of one ZooKeeper session: when the
// server last heard from it, and a channel closed once it may be gone.
//
// The server expires a session session_timeout after it last heard from
// the client, whatever the client believes; so the driver counts on its own
// clock, from the send time of the last request answered in the session
// (heard), and ends the session once heard+timeout-slack has passed, or
// when go-zookeeper reports a new session or an expired one. If
// go-zookeeper then resumes the same session, the driver knows it as a new
// session value: what was ended stays ended.
type session struct {
	id   int64
	lost chan struct{} // closed by end

	mu    sync.Mutex
	heard time.Time // send time of the last request answered in the session
	ended bool
}

func newSession(id int64) *session { return &session{id: id, lost: make(chan struct{})} }

// hear records that a request sent at sent was answered in the session.
func (s *session) hear(sent time.Time) {
	s.mu.Lock()
	if sent.After(s.heard) {
		s.heard = sent
	}
	s.mu.Unlock()
}

func (s *session) lastHeard() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard
}

// end closes lost, once.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		close(s.lost)
	}
}

func (s *session) isEnded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// validUntil is when the session may have expired on the server: timeout
// after heard, less the driver's slack. Zero if no request was answered.
func (d *zkDriver) validUntil(s *session) time.Time {
	h := s.lastHeard()
	if h.IsZero() {
		return h
	}
	return h.Add(d.valid())
}

// sessionTimeout is the session timeout the driver counts with: the one
// asked for, or the one the server granted if the driver knows it and it
// is shorter.
func (d *zkDriver) sessionTimeout() time.Duration {
	if g := d.granted.timeout(); g > 0 && g < d.timeout {
		return g
	}
	return d.timeout
}

// valid is how long after the server last heard from a session the driver
// counts it live: the session timeout less the slack.
func (d *zkDriver) valid() time.Duration {
	t := d.sessionTimeout()
	return t - slackFor(t)
}

// slackFor is how long before the session could expire on the server the
// driver gives it up: room for the rate of the two clocks, for the time
// between a request's send time and its reply reaching us, and for the
// session monitor's wake-up. The server never expires a session earlier
// than timeout after it last heard from it (it rounds up to its tick).
func slackFor(timeout time.Duration) time.Duration { return timeout/20 + 10*time.Millisecond }

// current returns the session go-zookeeper has now, ending the one the
// driver knew if it is not that one any more. While go-zookeeper has no
// session (it was told the last one expired and has not made a new one
// yet), it returns the last one, ended.
func (d *zkDriver) current() *session {
	id := d.conn.SessionID()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case id == 0: // go-zookeeper sets 0 when the server says it expired
		d.cur.end()
	case id != d.cur.id || d.cur.isEnded():
		d.cur.end()
		d.cur = newSession(id)
	}
	return d.cur
}

// pending is a go-zookeeper request in flight. go-zookeeper's calls take no
// context; a caller that gives up on one (ctx ended) leaves it to finish in
// its goroutine, which go-zookeeper always ends: with the reply, with an
// error when the connection drops (after at most 2/3 of the session
// timeout without a reply), or when the connection is closed.
type pending struct {
	done chan struct{} // closed when fn has returned; the fields below are set then
	err  error
	// inSession: the request was sent and answered within the session the
	// caller named (go-zookeeper's session id was that session's before
	// the call and after it).
	inSession bool
}

// start runs fn, one go-zookeeper request, in its own goroutine. If s is
// not nil and the request is answered in s, the answer counts as the
// server hearing from s at fn's start.
func (d *zkDriver) start(s *session, fn func() error) *pending {
	p := &pending{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		before := d.conn.SessionID()
		sent := time.Now()
		p.err = fn()
		after := d.conn.SessionID()
		p.inSession = s != nil && before == s.id && after == s.id
		if p.inSession && answered(p.err) {
			s.hear(sent)
		}
	}()
	return p
}

// errNoReply marks a call given up because its ctx ended first.
var errNoReply = errors.New("no reply from ZooKeeper in time")

// wait returns p's error, or errNoReply with ctx's if ctx ends first; then
// p's fields must not be read until p.done is closed.
func (p *pending) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("zklock: %w: %w", errNoReply, ctx.Err())
	}
}

// call runs fn as start does and waits for it as wait does.
func (d *zkDriver) call(ctx context.Context, s *session, fn func() error) (*pending, error) {
	p := d.start(s, fn)
	return p, p.wait(ctx)
}

// answered reports whether err (from a go-zookeeper call) came from the
// server: a reply, not a connection failure.
func answered(err error) bool {
	if err == nil {
		return true
	}
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNotEmpty, zk.ErrBadVersion, zk.ErrNoAuth,
		zk.ErrBadArguments, zk.ErrInvalidACL, zk.ErrNoChildrenForEphemerals, zk.ErrAPIError} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// monitor follows the session: it ends it when go-zookeeper changes or
// loses it, and when the server may have expired it (heard+timeout-slack
// has passed: the connection is cut, or replies are not coming back). While
// the session is live it sends a cheap read whenever nothing was heard for
// a quarter of the timeout, so that heard tracks the server's view even
// when no lease is renewed. events, if not nil, is go-zookeeper's event
// channel: it only makes the monitor look sooner, and is drained.
func (d *zkDriver) monitor(events <-chan zk.Event) {
	defer close(d.done)
	poll := min(max(d.sessionTimeout()/40, 5*time.Millisecond), 50*time.Millisecond)
	timer := time.NewTimer(poll)
	defer timer.Stop()
	var beat *pending
	for {
		s := d.current()
		now := time.Now()
		next := poll
		if until := d.validUntil(s); !s.isEnded() && !until.IsZero() {
			if !now.Before(until) {
				s.end()
			} else {
				next = min(next, until.Sub(now))
			}
		}
		if beat != nil {
			select {
			case <-beat.done:
				beat = nil
			default:
			}
		}
		if beat == nil && !s.isEnded() && now.Sub(s.lastHeard()) > d.sessionTimeout()/4 {
			beat = d.start(s, func() error { _, _, err := d.conn.Exists("/"); return err })
		}
		timer.Reset(next) // Go ≥ 1.23: no stale tick to drain
		select {
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case <-timer.C:
		case <-d.life.Done():
			return
		}
	}
}
