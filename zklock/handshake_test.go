package zklock_test

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
)

// stallProxy forwards TCP connections to target, except the ones it is
// told to stall: those it accepts and reads, and never answers, as a server
// that accepted a connection and lost it does (a ZooKeeper restarting on a
// loaded machine left the fault suite's clients so).
type stallProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	stall    int        // how many of the next connections to stall
	stalled  int        // how many were stalled
	accepted int        // how many were accepted
	conns    []net.Conn // every connection, both sides, closed by cut or close
	wg       sync.WaitGroup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.serve()
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

// cut closes every connection, as a server's crash does, and stalls the
// next n connections.
func (p *stallProxy) cut(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stall = n
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// counts reports how many connections were accepted, and stalled.
func (p *stallProxy) counts() (accepted, stalled int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.stalled
}

func (p *stallProxy) close() {
	_ = p.ln.Close()
	p.cut(0)
	p.wg.Wait()
}

func (p *stallProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, client)
		p.accepted++
		stall := p.stall > 0
		if stall {
			p.stall--
			p.stalled++
		}
		p.mu.Unlock()
		if stall {
			p.wg.Add(1)
			go func() { defer p.wg.Done(); _, _ = io.Copy(io.Discard, client) }()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.copy(server, client)
		go p.copy(client, server)
	}
}

func (p *stallProxy) copy(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// A connection the server accepts and never answers does not hold the
// client for long: the driver gives up its handshake after 2/3 of the
// session timeout (go-zookeeper would wait for the connect response ten
// times that: 27s with a 4s session, past any lock's wait), and
// go-zookeeper dials again. The fault suite's zk elect × restart-server saw
// it: a ZooKeeper restarting on a loaded machine stalled every client's
// first connection, and nothing was granted for 13s (a 2s session).
func TestStalledHandshakeIsGivenUp(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	p := newStallProxy(t, srv.Addr())
	c, err := dlock.Open(t.Context(), "zk://"+p.addr()+"/?session_timeout="+faultTimeout.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.close(); _ = c.Close() })
	ctx := t.Context()
	m := c.Mutex("stalled/x")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The bound is the handshake's alone: a connection lives on past it.
	time.Sleep(faultTimeout)
	if l, err = m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.counts(); n != 1 {
		t.Fatalf("%d connections before the cut; want 1, kept past the handshake's bound", n)
	}

	p.cut(1)
	// go-zookeeper dials again a second after the cut; the driver gives
	// the stalled handshake up 2/3 of the session timeout after that
	// dial, and go-zookeeper dials again a second later (about 5s in
	// all). The bound leaves room for a loaded machine, and is well short
	// of the 10 × 2/3 of the timeout go-zookeeper alone waits (27s).
	bound := 3 * faultTimeout
	lctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	began := time.Now()
	l, err = m.Lock(lctx)
	if err != nil {
		_, stalled := p.counts()
		t.Fatalf("Lock after a stalled handshake: %v (after %v; stalled connections: %d)",
			err, time.Since(began).Round(time.Millisecond), stalled)
	}
	t.Logf("locked %v after the cut", time.Since(began).Round(time.Millisecond))
	if _, stalled := p.counts(); stalled != 1 {
		t.Errorf("%d connections stalled; want the test to have stalled 1", stalled)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
