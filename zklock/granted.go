package zklock

import (
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"
)

// granted learns the session timeout the server granted, which can be
// shorter than the one asked for (a server keeps it within 2 to 20 of its
// ticks): it reads it from the connect response that opens every
// connection go-zookeeper dials with it. go-zookeeper keeps the value to
// itself.
//
// It also makes the TLS connections of a URL with tls=true, and reports a
// connection refused for good (see refusal).
type granted struct {
	ms      atomic.Int64
	tls     *tlsDialer // nil: plaintext
	refused *refusal   // nil: not reported
}

// dial is a zk.Dialer.
func (g *granted) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, addr, timeout)
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
	return &connectReader{Conn: c, g: g, addr: addr}, nil
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
// (int32), then timeOut (int32, milliseconds).
type connectReader struct {
	net.Conn
	g    *granted
	addr string
	head [12]byte
	got  int
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
	return n, err
}
