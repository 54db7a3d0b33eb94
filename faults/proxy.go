package faults

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards loopback TCP connections to one upstream address. Cut makes
// it stop forwarding in both directions without closing any connection, as
// a network partition that drops packets would: nothing gets through, not
// even a close, and both ends see silence. Heal forwards again, delivering
// what was held back, as TCP's retransmissions would once the partition
// heals (dropping bytes instead would corrupt the streams, which no network
// does to a live TCP connection).
type Proxy struct {
	Addr     string // where clients connect
	upstream string
	ln       net.Listener

	mu     sync.Mutex
	cut    bool
	healed chan struct{}         // closed while not cut
	closed chan struct{}         // closed by Close
	conns  map[net.Conn]net.Conn // client side -> upstream side
	wg     sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to upstream.
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]net.Conn{},
		healed: make(chan struct{}), closed: make(chan struct{})}
	close(p.healed)
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		select {
		case <-p.closed: // Close has already closed the others
			p.mu.Unlock()
			_ = c.Close()
			_ = u.Close()
			return
		default:
		}
		p.conns[c] = u
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(u, c, c, u)
		go p.pump(c, u, c, u)
	}
}

// pump copies src to dst, holding back while cut; when either side ends,
// both are closed, once healed: a close is held back like any packet.
func (p *Proxy) pump(dst, src, client, up net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.waitHealed()
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			break
		}
	}
	_ = client.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, client)
	p.mu.Unlock()
}

// waitHealed returns when the proxy is not cut, or is closed.
func (p *Proxy) waitHealed() {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
	case <-p.closed:
	}
}

// Cut stops forwarding; connections stay open.
func (p *Proxy) Cut() { p.setCut(true) }

// Heal forwards again, what was held back first.
func (p *Proxy) Heal() { p.setCut(false) }

func (p *Proxy) setCut(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v == p.cut {
		return
	}
	p.cut = v
	if v {
		p.healed = make(chan struct{})
	} else {
		close(p.healed)
	}
}

// UpstreamPorts returns the local ports of the proxy's open connections to
// the upstream: how the server sees this client (to kill its connections).
func (p *Proxy) UpstreamPorts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ports []int
	for _, u := range p.conns {
		if a, ok := u.LocalAddr().(*net.TCPAddr); ok {
			ports = append(ports, a.Port)
		}
	}
	return ports
}

// Close stops listening, closes every connection and waits for its
// goroutines. It may be called more than once.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	select {
	case <-p.closed:
	default:
		close(p.closed)
	}
	for c, u := range p.conns {
		_ = c.Close()
		_ = u.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

var _ io.Closer = (*Proxy)(nil)
