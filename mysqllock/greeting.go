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
	// greetWait is how long the greeting may take before a second
	// connection asks the server whether it is something else.
	greetWait = time.Second
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
	head, err := greeting(ctx, c, addr)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &greeted{Conn: c, head: head}, nil
}

// greeting reads the first bytes of what the server at addr sends on c and
// returns them if they begin a MySQL greeting; otherwise an error saying
// what the server did instead.
func greeting(ctx context.Context, c net.Conn, addr string) ([]byte, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	deadline := time.Now().Add(greetWait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetReadDeadline(deadline)
	head := make([]byte, 5) // the packet header and the payload's first byte
	n, err := io.ReadFull(c, head)
	if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
		if n == 0 { // silent: a slow MySQL server, or one that waits for the client
			if err := askServer(ctx, addr); err != nil {
				return nil, err
			}
		}
		_ = c.SetReadDeadline(time.Time{})
		if ctx.Err() == nil { // else AfterFunc's deadline may have been cleared
			var m int
			m, err = io.ReadFull(c, head[n:])
			n += m
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case n == len(head):
		return head, notGreeting(head, addr)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("no MySQL greeting from the server at %s (a server that says nothing, even when spoken to, cannot be told from a slow one): %w", addr, context.Cause(ctx))
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return nil, fmt.Errorf("the server at %s hung up without a MySQL greeting: is it a MySQL server's port?", addr)
	}
	return nil, fmt.Errorf("reading the greeting of the server at %s: %w", addr, err)
}

// notGreeting says why head, the first 5 bytes from the server at addr, does
// not begin a MySQL greeting: a packet of sequence number 0 whose payload is
// protocol version 10 or an error packet.
func notGreeting(head []byte, addr string) error {
	size := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
	if size > 0 && size < 1<<16 && head[3] == 0 && (head[4] == 10 || head[4] == 0xff) {
		return nil
	}
	return fmt.Errorf("the server at %s answered with something other than a MySQL greeting: is it a MySQL server's port?", addr)
}

// askServer connects to the silent server at addr again, speaks first and
// returns an error if what comes back is not a MySQL greeting. It returns nil
// if it cannot tell: the server greets, or stays silent, or ctx ends (which
// greeting then reports).
func askServer(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write(ask); err != nil {
		return nil
	}
	head := make([]byte, 5)
	_, err = io.ReadFull(c, head)
	switch {
	case err == nil:
		return notGreeting(head, addr)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("the server at %s sent no MySQL greeting, and hung up when spoken to: is it a MySQL server's port?", addr)
	}
	return nil
}

// greeted is a connection whose first bytes greeting has read: Read returns
// them first.
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
