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
	"github.com/dlock/dlock/mysqllock"
)

// Edges of Open's check that the port speaks MySQL (greeting.go), from an
// adversary pass (s10-adv2).

// A ctx cancelled while Open asks a silent server on its second connection
// ends Open then: the question's wait followed only its own deadline
// (askWait). Here that wait is unbounded, so Open returns only if it
// follows ctx.
func TestCancelDuringProbe(t *testing.T) {
	mysqllock.SetAskWait(t, time.Hour)
	var once sync.Once
	asked := make(chan struct{})
	silent := listen(t, func(c net.Conn) {
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
