package testserver

import (
	"io"
	"net"
	"testing"
)

// Serve's cleanup closes the connections still open and returns only once
// serve has returned on each: nothing outlives the test.
func TestServeCleanupEndsConnections(t *testing.T) {
	started, returned := make(chan struct{}), make(chan struct{})
	var c net.Conn
	t.Run("serve", func(t *testing.T) {
		addr := Serve(t, func(c net.Conn) {
			close(started)
			_, _ = io.Copy(io.Discard, c) // until the connection is closed
			close(returned)
		})
		var err error
		if c, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		<-started
	})
	defer c.Close()
	select {
	case <-returned:
	default:
		t.Fatal("serve still running after cleanup")
	}
	if n, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the client's connection still open after cleanup: read %d bytes", n)
	}
}
