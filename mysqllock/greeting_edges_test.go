package mysqllock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock/dlock"
	"github.com/dlock/dlock/internal/testserver"
	"github.com/dlock/dlock/mysqllock"
)

// Edges of Open's check that the port speaks MySQL (greeting.go), from an
// adversary pass (s10-adv2).

// A server that speaks first with fewer bytes than a packet header and the
// payload's first byte, then waits for the client, is not MySQL either.
// greeting asked the server again only when it had said nothing at all, and
// otherwise waited for the rest until ctx ended: Open failed with the
// deadline, saying "a server that says nothing". Bytes that cannot begin a
// greeting (a sequence number not 0, a size no greeting has) are now
// refused at once; a stall within bytes that may begin one is asked about
// on a second connection, as silence is.
func TestShortGarbageThenWait(t *testing.T) {
	for _, tc := range []struct{ name, sends, says string }{
		{"OKLine", "OK\r\n", "answered with something other than a MySQL greeting"},
		{"QuestionLine", "?\n", "answered with something other than a MySQL greeting"}, // a size of 2560 or more
		{"Sequence1", "\x4a\x00\x00\x01", "answered with something other than a MySQL greeting"},
		{"SizeZero", "\x00\x00\x00", "answered with something other than a MySQL greeting"},
		{"OneByte", "?", "stalled within its first 5 bytes when spoken to"},
		{"Header", "\x4a\x00\x00\x00", "stalled within its first 5 bytes when spoken to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := testserver.Serve(t, func(c net.Conn) {
				_, _ = c.Write([]byte(tc.sends))
				_, _ = io.Copy(io.Discard, c)
			})
			u := "mysql://root:s3cret@" + addr + "/dlock"
			err := openWithin(t, u, 20*time.Second)
			if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), addr) {
				t.Errorf("Open against a server that sent %q and waits: %v; want it to say %q, naming the address, before the deadline", tc.sends, err, tc.says)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}

// stallProxy forwards each connection to target; on the first, it forwards
// only the first k bytes of the server's greeting until a second connection
// (greeting's question) has come: a MySQL server whose greeting stalls on
// one connection and not on the next.
func stallProxy(t *testing.T, target string, k int) string {
	t.Helper()
	var mu sync.Mutex
	conns := 0
	second := make(chan struct{})
	return testserver.Serve(t, func(c net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		if conns == 2 {
			close(second)
		}
		mu.Unlock()
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		defer up.Close()
		go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
		if first {
			if _, err := io.CopyN(c, up, int64(k)); err != nil {
				return
			}
			select {
			case <-second:
			case <-t.Context().Done():
				return
			}
		}
		_, _ = io.Copy(c, up)
	})
}

// A real server's greeting that stalls, before or within its header, on the
// connection Open makes is accepted once the second connection Open makes
// to ask is greeted.
func TestStalledGreetingOfRealServer(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	for _, k := range []int{0, 1, 3} {
		addr := stallProxy(t, srv.Addr(), k)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		c, err := dlock.Open(ctx, "mysql://root@"+addr+"/dlock")
		cancel()
		if err != nil {
			t.Errorf("Open through a proxy stalling the greeting after %d bytes: %v", k, err)
			continue
		}
		l, err := c.Mutex("greeting-stalled").TryLock(t.Context())
		if err != nil {
			t.Errorf("TryLock after Open: %v", err)
		} else {
			_ = l.Unlock(t.Context())
		}
		_ = c.Close()
	}
}

// A server that sends a greeting's header and then nothing cannot be told
// from a MySQL server stalled in its greeting, so Open waits until ctx
// ends; it said only "mysqllock: connect: context deadline exceeded" (from
// go-sql-driver's handshake read). It now says what it waited for.
func TestGreetingHeaderThenHang(t *testing.T) {
	addr := testserver.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte{0x4a, 0, 0, 0, 10, '5', '.'})
		_, _ = io.Copy(io.Discard, c)
	})
	u := "mysql://root:s3cret@" + addr + "/dlock"
	err := openWithin(t, u, 3*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open: %v; want context.DeadlineExceeded", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "sent the start of one and then nothing") || !strings.Contains(msg, addr) {
		t.Errorf("Open: %v; want it to say the server at %s sent the start of a greeting and then nothing", err, addr)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the password: %v", err)
	}
}

// A server that hangs up in the middle of a greeting is said to.
func TestGreetingThenHangUp(t *testing.T) {
	addr := testserver.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte{0x4a, 0, 0, 0, 10, '5', '.'})
	})
	err := openWithin(t, "mysql://root@"+addr+"/dlock", 20*time.Second)
	if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "hung up in the middle of its MySQL greeting") {
		t.Errorf("Open: %v; want it to say the server hung up in its greeting", err)
	}
}

// A ctx cancelled while Open asks a silent server on its second connection
// ends Open then: the question's wait followed only its own deadline
// (askWait). Here that wait is unbounded, so Open returns only if it
// follows ctx.
func TestCancelDuringProbe(t *testing.T) {
	mysqllock.SetAskWait(t, time.Hour)
	var once sync.Once
	asked := make(chan struct{})
	silent := testserver.Serve(t, func(c net.Conn) {
		b := make([]byte, len("PING\r\n"))
		if _, err := io.ReadFull(c, b); err == nil && bytes.Equal(b, []byte("PING\r\n")) {
			once.Do(func() { close(asked) })
		}
		_, _ = io.Copy(io.Discard, c)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := dlock.Open(ctx, "mysql://root:s3cret@"+silent+"/dlock")
		if err == nil {
			_ = c.Close()
		}
		done <- err
	}()
	select {
	case <-asked:
	case err := <-done:
		t.Fatalf("Open returned before it asked the server: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "no MySQL greeting from the server at "+silent) {
			t.Errorf("Open: %v; want context.Canceled saying no MySQL greeting came", err)
		}
	case <-time.After(10 * time.Second): // a guard, not a measure: Open should return at once
		t.Fatal("Open did not return after its ctx was cancelled while it asked the server")
	}
}

// tls=preferred and tls=skip-verify against other servers' ports fail as
// the tls=true and plaintext URLs do, without the password.
func TestNotMySQLTLSVariants(t *testing.T) {
	garbage := testserver.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("INFO {\"server_id\":\"x\"}\r\n"))
		_, _ = c.Read(make([]byte, 1))
	})
	hangup := testserver.Serve(t, func(net.Conn) {})
	for _, addr := range []string{garbage, hangup} {
		for _, q := range []string{"?tls=preferred", "?tls=skip-verify", "?tls=true&insecure_skip_verify=true"} {
			u := "mysql://root:s3cret@" + addr + "/dlock" + q
			err := openWithin(t, u, 30*time.Second)
			if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "MySQL") {
				t.Errorf("Open(%s): %v; want it told not MySQL, naming the address", u, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("Open(%s): %v shows the password", u, err)
			}
		}
	}
}

// A real server refusing the password (and the TLS/NeedTLS hints added to
// such errors) never shows it, whatever characters it holds.
func TestRealServerErrorsHidePassword(t *testing.T) {
	srv := testserver.MariaDB(t)
	testserver.MariaDBURL(t, srv, "dlock")
	plain := map[string]string{"s3cret": "s3cret", "p%40ss%3Aw%2Frd": "p@ss:w/rd", "%E2%82%ACuro": "€uro"}
	for pw, p := range plain {
		for _, q := range []string{"", "?tls=preferred", "?mode=session"} {
			u := "mysql://nosuchuser:" + pw + "@" + srv.Addr() + "/dlock" + q
			err := openWithin(t, u, 30*time.Second)
			if msg := err.Error(); strings.Contains(msg, p) || strings.Contains(msg, pw) {
				t.Errorf("Open(%s): %v shows the password", q, err)
			}
		}
	}
}
