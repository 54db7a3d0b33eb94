package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// Stopping the wait display does not wait out an inspection in flight that
// ignores its cancelled context, as go-redis's reads do (they end at their
// deadline): dlock run's exit on SIGTERM waited for it. Nor is the late
// answer shown once the display is stopped.
func TestStopWaitDoesNotWaitForTheStore(t *testing.T) {
	verbose := global.verbose
	global.verbose = 1 // the display runs off a terminal only with -v
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	defer func() { global.verbose, os.Stderr = verbose, stderr }()

	asked, answer := make(chan struct{}), make(chan struct{})
	stop := showWait(`lock "x"`, "x", func(context.Context) (string, error) {
		close(asked)
		<-answer // deaf to its context
		return " (held by the-late-answer)", nil
	})
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the display never asked who holds the lock")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Error("stop waited for the inspection in flight")
	}
	close(answer)
	<-stopped
	time.Sleep(300 * time.Millisecond) // the display's goroutine writes now, if it would
	os.Stderr = stderr
	_ = w.Close()
	out, _ := io.ReadAll(r)
	if strings.Contains(string(out), "the-late-answer") {
		t.Errorf("the answer that came after stop was shown: %q", out)
	}
}
