package zklock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
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

// granted learns the session timeout the server granted, which can be
// shorter than the one asked for (a server keeps it within 2 to 20 of its
// ticks): it reads it from the connect response that opens every
// connection go-zookeeper dials with it. go-zookeeper keeps the value to
// itself.
//
// It also makes the TLS connections of a URL with tls=true, reports a
// connection refused for good (see refusal), and bounds each connection's
// handshake (see handshakeWait).
type granted struct {
	ms      atomic.Int64
	asked   time.Duration // the session timeout asked for
	hosts   int           // how many servers the URL names
	tls     *tlsDialer    // nil: plaintext
	refused *refusal      // nil: not reported
}

// handshakeWait bounds a connection's handshake, from its dial to the end
// of the server's connect response: 2/3 of the session timeout, the
// longest go-zookeeper waits for any reply on a connection, and no more
// than the timeout divided among the servers, as ZooKeeper's Java client
// bounds a connection attempt. go-zookeeper alone waits ten times 2/3 of
// the timeout for the response (13s with a 2s session), then as long as
// it takes for its body, with no deadline: a server that accepted the
// connection and lost it (a restart on a loaded machine) would hold the
// client that long, its session expiring meanwhile, and nothing would be
// granted to it.
func (g *granted) handshakeWait() time.Duration {
	t := g.asked
	if gt := g.timeout(); gt > 0 && gt < t {
		t = gt
	}
	return min(t*2/3, t/time.Duration(max(g.hosts, 1)))
}

// dial is a zk.Dialer.
func (g *granted) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	limit := time.Now().Add(g.handshakeWait())
	c, err := net.DialTimeout(network, addr, timeout)
	g.refused.noteDial(addr, err)
	if err != nil {
		return nil, err
	}
	if g.tls != nil {
		tc, err := g.tls.handshake(c, addr, timeout)
		if err != nil {
			_ = c.Close()
			if definitive(err) {
				g.refused.set(err)
			}
			return nil, err
		}
		c = tc
	}
	return &connectReader{Conn: c, g: g, addr: addr, limit: limit}, nil
}

// timeout returns the last granted timeout, or 0 if none was seen.
func (g *granted) timeout() time.Duration {
	if g == nil {
		return 0
	}
	return time.Duration(g.ms.Load()) * time.Millisecond
}

// connectReader passes a connection's reads through and notes the timeout
// in the connect response: after its 4-byte length, protocolVersion
// (int32), then timeOut (int32, milliseconds). Until it has read the whole
// response, no read deadline is later than limit (see handshakeWait).
// go-zookeeper reads the connection from one goroutine at a time.
type connectReader struct {
	net.Conn
	g     *granted
	addr  string
	limit time.Time // the handshake's deadline
	head  [12]byte
	got   int
	read  int  // bytes read in all
	done  bool // the connect response has been read
}

// SetReadDeadline sets the connection's read deadline to t, or to the
// handshake's limit if that is earlier (or t is none) while the connect
// response is still to come.
func (c *connectReader) SetReadDeadline(t time.Time) error {
	if !c.done && (t.IsZero() || t.After(c.limit)) {
		t = c.limit
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and the connection's SetWriteDeadline.
func (c *connectReader) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func (c *connectReader) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil && c.got+n == 0 && c.g.tls == nil && c.g.refused != nil {
		c.g.refused.watch.ClosedBeforeAnswer(c.addr) // closed before answering: a TLS port?
	}
	if c.got < len(c.head) {
		c.got += copy(c.head[c.got:], b[:n])
		if c.got == len(c.head) {
			if ms := int32(binary.BigEndian.Uint32(c.head[8:])); ms > 0 {
				c.g.ms.Store(int64(ms))
			}
		}
	}
	if c.read += n; !c.done && c.got >= 4 { // the response's length is in
		c.done = c.read >= 4+int(binary.BigEndian.Uint32(c.head[:4]))
	}
	return n, err
}

// renewInFlight bounds the goroutines one Renew call runs checks from.
const renewInFlight = 64

// existsCheck is one check that a holder's node exists.
type existsCheck struct {
	*pending
	ok   bool     // set when done is closed
	stat *zk.Stat // set when done is closed
}

// Renew checks that each holder's node still exists, with up to
// renewInFlight checks in flight on the connection at once (10,000 leases
// checked one by one would outlast the renewal interval). The session
// keeps the nodes: a hold is valid until the session could expire on the
// server, session_timeout after the server last heard from it (counted
// from the sending of the last request answered in the session), less the
// driver's slack.
//
// Renew returns when ctx ends, with the checks still unanswered reported
// as uncertain errors. A check left in flight is not sent again: the next
// Renew waits for the same one, so a cut connection costs one goroutine per
// lease, which go-zookeeper ends when it drops the connection.
func (d *zkDriver) Renew(ctx context.Context, batch []driver.Held) []driver.RenewResult {
	began := time.Now()
	res := make([]driver.RenewResult, len(batch))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(len(batch), renewInFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res[i] = d.check(ctx, began, batch[i])
			}
		}()
	}
	for i := range batch {
		next <- i
	}
	close(next)
	wg.Wait()
	return res
}

// checkOf returns the lease's check in flight, or sends a new one unless
// ctx has ended (then nil).
func (d *zkDriver) checkOf(ctx context.Context, l *Lease) *existsCheck {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.check != nil {
		select {
		case <-l.check.done:
		default:
			return l.check
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	c := &existsCheck{}
	c.pending = d.start(l.sess, func() (err error) { c.ok, c.stat, err = d.conn.Exists(l.Path); return err })
	l.check = c
	return c
}

func (d *zkDriver) check(ctx context.Context, began time.Time, h driver.Held) driver.RenewResult {
	l, ok := h.Handle.(*Lease)
	if !ok {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w", h.Name, dlock.ErrLeaseLost)}
	}
	s := l.sess
	gone := func(why string) driver.RenewResult {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w: %s", h.Name, dlock.ErrLeaseLost, why)}
	}
	if s.isEnded() {
		return gone("the session may have expired")
	}
	c := d.checkOf(ctx, l)
	if c == nil {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: not sent: %w", h.Name, ctx.Err())}
	}
	err := c.wait(ctx)
	switch {
	case errors.Is(err, errNoReply):
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w", h.Name, err)}
	case errors.Is(err, zk.ErrSessionExpired) || !c.inSession && d.conn.SessionID() != s.id:
		s.end() // go-zookeeper has moved on to another session (or none)
		return gone("the session expired")
	case err != nil:
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: %w", h.Name, err)}
	case !c.inSession:
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: the check was not answered in the lease's session", h.Name)}
	case !c.ok || c.stat.Czxid != l.Czxid || c.stat.EphemeralOwner != s.id:
		return gone(fmt.Sprintf("the node %s is gone", l.Path))
	}
	v := d.validUntil(s).Sub(began) // began is no earlier than dlock counts from
	if v <= 0 {
		return driver.RenewResult{Err: fmt.Errorf("zklock: renew %q: the server has not answered since %v", h.Name, s.lastHeard())}
	}
	return driver.RenewResult{Validity: min(h.TTL, v)}
}
