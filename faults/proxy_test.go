package faults

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/dlock/dlock/internal/testserver"
)

// A cut proxy forwards nothing, not even a close, and keeps connections
// open; healed, it delivers what it held back.
func TestProxyCutHeal(t *testing.T) {
	upstream := testserver.Serve(t, func(c net.Conn) { _, _ = io.Copy(c, c) }) // an echo server
	p, err := NewProxy(upstream)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	echo := func(msg string, wait time.Duration) (string, error) {
		if _, err := c.Write([]byte(msg + "\n")); err != nil {
			return "", err
		}
		_ = c.SetReadDeadline(time.Now().Add(wait))
		return r.ReadString('\n')
	}
	if got, err := echo("a", 5*time.Second); err != nil || got != "a\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}
	p.Cut()
	if got, err := echo("b", 300*time.Millisecond); err == nil {
		t.Fatalf("cut, yet %q came back", got)
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("cut: want silence (a timeout), got %v", err)
	}
	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "b\n" {
		t.Fatalf("healed: the held-back message: %q, %v", got, err)
	}
}
