package testserver

import (
	"bytes"
	"cmp"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Proxy forwards TCP connections on a loopback port to a server, and can
// blackhole them: from Blackhole on, every byte either way is dropped and no
// connection is closed, as when a network silently loses packets (the
// server sees no traffic and no close; the client's requests go unanswered).
// It can also delay them, as a network's latency does (SetDelay).
// It is stopped at cleanup.
type Proxy struct {
	ln     net.Listener
	target string
	drop   atomic.Bool
	after  atomic.Pointer[[]byte] // BlackholeAfter's match
	at     atomic.Pointer[cutAt]  // BlackholeAt's match
	delay  atomic.Int64           // one way, in nanoseconds
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	wg     sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port).
func NewProxy(t TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p := &Proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole drops all traffic from now on, on every connection, old and
// new, without closing any.
func (p *Proxy) Blackhole() { p.drop.Store(true) }

// BlackholeAfter blackholes the proxy (Blackhole) right after it has
// passed on a read from a client that contains match, in any ASCII case:
// the server gets that request whole, and nothing after it; the client
// hears nothing back. Not with a delay set.
func (p *Proxy) BlackholeAfter(match []byte) {
	m := bytes.ToLower(match)
	p.after.Store(&m)
}

// BlackholeAt blackholes the proxy (Blackhole) in the middle of a read
// from a client that contains match, in any ASCII case: it passes on that
// read up to the end of match's first occurrence, or, if stop is not nil
// and occurs after it in the read, up to just before that, and nothing
// after. The server gets part of what the client sent at once, as across
// a network that cut it between two segments. Not with a delay set.
func (p *Proxy) BlackholeAt(match, stop []byte) {
	p.at.Store(&cutAt{bytes.ToLower(match), bytes.ToLower(stop)})
}

// cutAt is BlackholeAt's match and stop.
type cutAt struct{ match, stop []byte }

// in returns where c cuts b, or -1.
func (c *cutAt) in(b []byte) int {
	lb := bytes.ToLower(b)
	i := bytes.Index(lb, c.match)
	if i < 0 {
		return -1
	}
	i += len(c.match)
	if j := bytes.Index(lb[i:], c.stop); len(c.stop) > 0 && j >= 0 {
		i += j
	}
	return i
}

// Blackholed reports whether the proxy drops all traffic now.
func (p *Proxy) Blackholed() bool { return p.drop.Load() }

// SetDelay delays every byte from now on, either way, on every connection,
// old and new, by at least d: what the proxy reads from one side at time t
// it writes to the other no earlier than t+d, in order, and no later than
// that plus the scheduler's lateness (each chunk waits for its own time
// only, not behind the earlier chunks' waits). A round trip through the
// proxy then takes at least 2·d more than without it. Zero ends the delay
// for what is read from then on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(max(d, 0))) }

// Close closes the listener and every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track records c to be closed by Close; false if already closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil || !p.track(c) {
			return
		}
		if p.drop.Load() { // accepted, never answered
			p.wg.Add(1)
			go p.pipe(nil, c, true)
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(s) {
			return
		}
		p.wg.Add(2)
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies src to dst (nil: nowhere) until src fails, dropping what it
// reads once blackholed. A close is passed on only while not blackholed.
// Once a delay is set, what it reads goes through a delayed writer (late)
// from then on, so that nothing overtakes what is still waiting.
// fromClient: src is the client (BlackholeAfter).
func (p *Proxy) pipe(dst, src net.Conn, fromClient bool) {
	defer p.wg.Done()
	var late chan chunk // nil until a delay is first seen
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !p.drop.Load() {
			if late == nil && p.delay.Load() > 0 {
				late = make(chan chunk, 64)
				p.wg.Add(1)
				go p.writeLate(dst, late)
			}
			cut := -1 // where BlackholeAt cuts this read
			if c := p.at.Load(); fromClient && c != nil && late == nil {
				cut = c.in(buf[:n])
			}
			switch {
			case cut >= 0: // blackholed first, so that no answer to it gets back
				p.drop.Store(true)
				_, werr := dst.Write(buf[:cut])
				err = cmp.Or(err, werr)
			case late != nil:
				late <- chunk{due: time.Now().Add(time.Duration(p.delay.Load())), b: append([]byte(nil), buf[:n]...)}
			default:
				// BlackholeAfter's match: blackholed before the write, so that
				// no answer to it gets back. Set after it, the server's answer
				// could pass the other way first, and a loaded machine (make
				// test-busy) saw a client get it.
				if m := p.after.Load(); fromClient && m != nil && bytes.Contains(bytes.ToLower(buf[:n]), *m) {
					p.drop.Store(true)
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
		}
		if err != nil {
			break
		}
	}
	if late != nil { // writeLate passes the close on after what it holds
		close(late)
		return
	}
	if dst != nil && !p.drop.Load() {
		_ = dst.Close()
	}
}

// chunk is what a pipe read, to be written at due.
type chunk struct {
	due time.Time
	b   []byte
}

// writeLate writes each chunk of in to dst at its due time, then closes
// dst (while not blackholed) when in is closed. After a failed write it
// drops the rest, as pipe does once its writes fail.
func (p *Proxy) writeLate(dst net.Conn, in <-chan chunk) {
	defer p.wg.Done()
	failed := false
	for c := range in {
		if failed {
			continue
		}
		sleepUntil(c.due)
		if p.drop.Load() {
			continue
		}
		if _, err := dst.Write(c.b); err != nil {
			failed = true
			_ = dst.Close() // as pipe's close on a failed write: the other side's pipe ends too
		}
	}
	if !p.drop.Load() {
		_ = dst.Close()
	}
}

// sleepUntil returns at t or soon after, in a nanosleep of its thread: the
// runtime's timers wait at least 1 ms when the process has nothing else to
// run (its poller's epoll_wait counts whole milliseconds), so a time.Sleep
// of 0.5 ms took 1.09 ms (median), which would make a 0.5 ms delay twice
// that; nanosleep took 0.58 ms on the same machine.
func sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for syscall.Nanosleep(&ts, &ts) == syscall.EINTR { // ts is what is left
	}
}
