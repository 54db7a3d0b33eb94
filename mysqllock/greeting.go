package mysqllock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// A MySQL server speaks first: its greeting (protocol version 10, or an
// error packet such as "Too many connections") reaches a client as soon as
// it connects, and go-sql-driver reads it until the connect timeout. Most
// other servers (Redis, HTTP, PostgreSQL, a TLS port) wait for the client,
// so a URL with another server's port, TLS or not, waited out the whole
// timeout and said "context deadline exceeded". greeter tells it at Open.
//
// It checks only the connections made while Open runs: once a client is
// open, its pool dials as go-sql-driver does.
const (
	// greetWait is how long the greeting's header may take before a second
	// connection asks the server whether it is something else.
	greetWait = time.Second
	// maxGreeting bounds the size of a greeting packet: a protocol 10
	// greeting is about 50 bytes besides its version string (at most 60
	// in MySQL and MariaDB) and auth plugin name, an error packet at most
	// 9 besides its message (at most 512), so a first packet of 2 KiB or
	// more is something else.
	maxGreeting = 1 << 11
)

// askWait bounds the second connection's wait for an answer; a variable
// only so that tests can make it unbounded but for ctx.
var askWait = 2 * time.Second

// ask is what the second connection sends: Redis and memcached answer it,
// an HTTP server answers 400; PostgreSQL and ZooKeeper, reading it as a
// length too large, hang up, as a TLS port does (or answers an alert). A
// MySQL server greets before it reads, so its greeting still comes first.
var ask = []byte("PING\r\n")

type greeter struct {
	opened atomic.Bool
}

// dial is the pool's mysql.Config.DialFunc.
func (g *greeter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, addr)
	if err != nil || g.opened.Load() {
		return c, err
	}
	pkt, err := greeting(ctx, c, addr)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &greeted{Conn: c, head: pkt}, nil
}

// greeting reads the first packet the server at addr sends on c and returns
// it if it is a MySQL greeting; otherwise an error saying what the server
// did instead. Bytes that cannot begin a greeting are refused as soon as
// they come. A server silent, or stalled within the packet's header, for
// greetWait is asked on a second connection (askServer); one that stalls
// after a greeting's header cannot be told from a slow MySQL server, and is
// waited for until ctx ends.
func greeting(ctx context.Context, c net.Conn, addr string) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	deadline := time.Now().Add(greetWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetReadDeadline(deadline)
	head := make([]byte, 5) // the packet header and the payload's first byte
	n, err := readHead(c, head, 0)
	if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil && couldGreet(head[:n]) {
		// silent or stalled: a slow MySQL server, or one that waits for the client
		if err := askServer(ctx, addr); err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Time{})
		if ctx.Err() == nil { // else AfterFunc's deadline may have been cleared
			n, err = readHead(c, head, n)
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case !couldGreet(head[:n]):
		return nil, notGreeting(addr)
	case n == len(head):
	case ctx.Err() != nil && n == 0:
		return nil, fmt.Errorf("no MySQL greeting from the server at %s (a server that says nothing, even when spoken to, cannot be told from a slow one): %w", addr, context.Cause(ctx))
	case ctx.Err() != nil:
		return nil, fmt.Errorf("no MySQL greeting from the server at %s: it sent the first bytes of what may be one and then nothing (a stalled server cannot be told from a slow one): %w", addr, context.Cause(ctx))
	case hungUp(err):
		return nil, fmt.Errorf("the server at %s hung up without a MySQL greeting: is it a MySQL server's port?", addr)
	default:
		return nil, fmt.Errorf("reading the greeting of the server at %s: %w", addr, err)
	}
	// The header is a greeting's: read the rest of the packet here, so that
	// a server that stalls in it is named as such when ctx ends.
	pkt := make([]byte, 4+packetSize(head))
	copy(pkt, head)
	if ctx.Err() == nil { // else AfterFunc's deadline may have been cleared
		_, err = io.ReadFull(c, pkt[len(head):])
	} else if len(pkt) > len(head) {
		err = ctx.Err()
	}
	switch {
	case err == nil:
		return pkt, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("no whole MySQL greeting from the server at %s: it sent the start of one and then nothing (a stalled server cannot be told from a slow one): %w", addr, context.Cause(ctx))
	case hungUp(err):
		return nil, fmt.Errorf("the server at %s hung up in the middle of its MySQL greeting", addr)
	}
	return nil, fmt.Errorf("reading the greeting of the server at %s: %w", addr, err)
}

// readHead reads from c into head[n:] until head is full, a read fails, or
// head's bytes can no longer begin a MySQL greeting, and returns how many
// bytes head holds.
func readHead(c net.Conn, head []byte, n int) (int, error) {
	for n < len(head) {
		m, err := c.Read(head[n:])
		n += m
		if !couldGreet(head[:n]) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// packetSize is the payload size a MySQL packet header gives.
func packetSize(head []byte) int {
	return int(head[0]) | int(head[1])<<8 | int(head[2])<<16
}

// couldGreet reports whether p, the first bytes (up to 5) from a server,
// may begin a MySQL greeting: a packet of sequence number 0, of a size
// below maxGreeting, whose payload is protocol version 10 or an error packet.
// The size's bytes come least significant first, so those that came give a
// lower bound.
func couldGreet(p []byte) bool {
	size := 0
	for i := 0; i < len(p) && i < 3; i++ {
		size |= int(p[i]) << (8 * i)
	}
	switch {
	case size >= maxGreeting, len(p) >= 3 && size == 0:
		return false
	case len(p) >= 4 && p[3] != 0:
		return false
	case len(p) >= 5 && p[4] != 10 && p[4] != 0xff:
		return false
	}
	return true
}

// notGreeting is the error for a server at addr that sent bytes no MySQL
// greeting begins with.
func notGreeting(addr string) error {
	return fmt.Errorf("the server at %s answered with something other than a MySQL greeting: is it a MySQL server's port?", addr)
}

// hungUp reports whether err says the server closed the connection.
func hungUp(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// askServer connects to the server at addr again, speaks first and returns
// an error if what comes back is not a MySQL greeting, or a few bytes and
// then nothing for askWait. It returns nil if it cannot tell: the server
// greets, or stays silent, or ctx ends (which greeting then reports).
func askServer(ctx context.Context, addr string) error {
	actx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	var nd net.Dialer
	c, err := nd.DialContext(actx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	stop := context.AfterFunc(actx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(ask); err != nil {
		return nil
	}
	head := make([]byte, 5)
	n, err := readHead(c, head, 0)
	switch {
	case !couldGreet(head[:n]):
		return notGreeting(addr)
	case n == len(head) || ctx.Err() != nil:
		return nil
	case hungUp(err):
		return fmt.Errorf("the server at %s sent no MySQL greeting, and hung up when spoken to: is it a MySQL server's port?", addr)
	case n > 0 && errors.Is(err, os.ErrDeadlineExceeded):
		// A MySQL server writes its greeting whole: a header cut short for
		// seconds after it was spoken to is something else.
		return fmt.Errorf("the server at %s sent no MySQL greeting, and stalled within its first 5 bytes when spoken to: is it a MySQL server's port?", addr)
	}
	return nil
}

// greeted is a connection whose first packet greeting has read: Read returns
// it first.
type greeted struct {
	net.Conn
	head []byte
}

func (g *greeted) Read(p []byte) (int, error) {
	if len(g.head) > 0 {
		n := copy(p, g.head)
		g.head = g.head[n:]
		return n, nil
	}
	return g.Conn.Read(p)
}

// SyscallConn lets go-sql-driver check a pooled connection for liveness, as
// it does a *net.TCPConn; head is read during the handshake, long before.
func (g *greeted) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := g.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}
