package testserver

import (
	"net"
	"sync"
)

// Serve listens on a loopback port of the test's own and runs serve on a
// goroutine for each connection it accepts, closing the connection when
// serve returns: a stand-in for a server that is not the store (one that
// says something else, hangs up, or stays silent). It returns the
// listener's host:port. At cleanup it stops listening, closes the
// connections still open and waits for serve to return on each, so serve
// must return once its connection is closed.
func Serve(t TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("serve: %v", err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		closed bool // by cleanup: a connection accepted since is closed at once
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				_ = c.Close()
				return
			}
			conns[c] = struct{}{}
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				serve(c)
				_ = c.Close()
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
