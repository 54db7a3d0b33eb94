package testserver

import (
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections on a loopback port to a server, and can
// blackhole them: from Blackhole on, every byte either way is dropped and no
// connection is closed, as when a network silently loses packets (the
// server sees no traffic and no close; the client's requests go unanswered).
// It is stopped at cleanup.
type Proxy struct {
	ln     net.Listener
	target string
	drop   atomic.Bool
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
			go p.pipe(nil, c)
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
		go p.pipe(s, c)
		go p.pipe(c, s)
	}
}

// pipe copies src to dst (nil: nowhere) until src fails, dropping what it
// reads once blackholed. A close is passed on only while not blackholed.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !p.drop.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			break
		}
	}
	if dst != nil && !p.drop.Load() {
		_ = dst.Close()
	}
}
