package testserver

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every connection with what it reads, until cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	return Serve(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// A round trip through a delaying proxy takes at least twice the delay,
// and what goes through arrives whole and in order, on a connection opened
// before the delay was set as on one opened after.
func TestProxyDelay(t *testing.T) {
	const d = 20 * time.Millisecond
	p := NewProxy(t, echoServer(t))
	before, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	roundTrip(t, before, []byte("undelayed")) // the connection is up, without a delay
	p.SetDelay(d)
	after, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	for _, c := range []net.Conn{before, after} {
		for i := range 3 {
			start := time.Now()
			roundTrip(t, c, []byte{'p', 'i', 'n', 'g', byte('0' + i)})
			if took := time.Since(start); took < 2*d {
				t.Fatalf("round trip %d took %v through a proxy delaying %v each way; want at least %v", i, took, d, 2*d)
			}
		}
	}

	// Many writes of every size, read back while still being written:
	// the proxy's queue of chunks fills, and nothing is lost, changed or
	// reordered.
	want := make([]byte, 4<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(want))
		_, err := io.ReadFull(after, b)
		if err != nil {
			t.Errorf("reading the echo: %v", err)
		}
		got <- b
	}()
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(70000))
		if _, err := after.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if b := <-got; !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && b[i] == want[i] {
			i++
		}
		t.Fatalf("echo through the delaying proxy differs from what was sent from byte %d of %d", i, len(want))
	}
}

// SetDelay(0) ends the delay: what was queued still arrives first, then
// the rest, in order.
func TestProxyDelayEnds(t *testing.T) {
	p := NewProxy(t, echoServer(t))
	p.SetDelay(30 * time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("first,")); err != nil {
		t.Fatal(err)
	}
	// Let the proxy read it, so that it waits in the queue (had the proxy
	// not read it yet, the test would prove less, never fail wrongly).
	time.Sleep(5 * time.Millisecond)
	p.SetDelay(0)
	for _, s := range []string{"second,", "third"} {
		if _, err := c.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, len("first,second,third"))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	if string(b) != "first,second,third" {
		t.Fatalf("read %q; want %q", b, "first,second,third")
	}
}

// roundTrip writes msg on c and reads it back.
func roundTrip(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, len(msg))
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, msg) {
		t.Fatalf("echo %q; want %q", b, msg)
	}
}

// BlackholeAt passes on a client's read up to the end of the match (or
// just before the stop after it) and nothing after, in either direction,
// without closing the connection.
func TestProxyBlackholeAt(t *testing.T) {
	got := make(chan []byte, 8)
	addr := Serve(t, func(c net.Conn) {
		b := make([]byte, 64)
		for {
			n, err := c.Read(b)
			if n > 0 {
				got <- append([]byte(nil), b[:n]...)
				_, _ = c.Write(b[:n])
			}
			if err != nil {
				return
			}
		}
	})
	p := NewProxy(t, addr)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, []byte("before"))
	<-got
	p.BlackholeAt([]byte("CUT"), []byte("."))
	if _, err := c.Write([]byte("one cut here. two")); err != nil {
		t.Fatal(err)
	}
	var seen []byte
	for !bytes.HasSuffix(seen, []byte("one cut here")) {
		select {
		case b := <-got:
			seen = append(seen, b...)
		case <-time.After(10 * time.Second):
			t.Fatalf("the server got %q; want %q", seen, "one cut here")
		}
	}
	if !p.Blackholed() {
		t.Fatal("not blackholed after the match")
	}
	if _, err := c.Write([]byte("three")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	b := make([]byte, 64)
	if n, err := c.Read(b); n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through the blackhole, the client read %q, %v; want nothing until its deadline", b[:n], err)
	}
	select {
	case b := <-got:
		t.Fatalf("the server got %q after the cut", b)
	default:
	}
}
