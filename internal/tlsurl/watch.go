package tlsurl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Watch tells a plaintext client's Open, at once, that the server speaks
// TLS only, where the client would retry and time out with a bare EOF: a
// connection the server closes before answering anything is checked, once,
// with a TLS handshake of Watch's own (unverified: it only asks whether the
// server speaks TLS), and if the server speaks TLS, Watch calls refused
// with an error that says so and suggests hint.
type Watch struct {
	hint    string
	refused func(error)
	probed  sync.Once
	off     atomic.Bool
}

// NewWatch returns a Watch that calls refused; hint is the URL form to
// suggest, e.g. "rediss://" or "tls=true".
func NewWatch(hint string, refused func(error)) *Watch {
	return &Watch{hint: hint, refused: refused}
}

// Stop ends the watch (once Open succeeded: later closes are not its
// business).
func (w *Watch) Stop() {
	if w != nil {
		w.off.Store(true)
	}
}

// ClosedBeforeAnswer reports that the server at addr closed a connection
// before sending a byte.
func (w *Watch) ClosedBeforeAnswer(addr string) {
	if w == nil || w.off.Load() {
		return
	}
	w.probed.Do(func() {
		go func() {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second},
				Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return
			}
			_ = c.Close()
			if !w.off.Load() {
				w.refused(fmt.Errorf("the server at %s speaks TLS only and closed the plaintext connection: use %s", addr, w.hint))
			}
		}()
	})
}

// Conn wraps c, a plaintext connection to addr, to report a close before
// any answer; once the watch is stopped it returns c itself.
func (w *Watch) Conn(c net.Conn, addr string) net.Conn {
	if w == nil || w.off.Load() {
		return c
	}
	return &watchedConn{Conn: c, w: w, addr: addr}
}

type watchedConn struct {
	net.Conn
	w      *Watch
	addr   string
	answer bool
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.answer = true
	}
	if err != nil && !c.answer {
		c.w.ClosedBeforeAnswer(c.addr)
	}
	return n, err
}

// SyscallConn passes through to the connection underneath (which Read
// does not buffer), so clients that check idle sockets (go-redis) still can.
func (c *watchedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("tlsurl: not a syscall.Conn")
}
