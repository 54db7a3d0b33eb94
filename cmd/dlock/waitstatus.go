package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dlock/dlock"
)

// waitShown is how long dlock run or elect waits before it says so, and
// waitRecheck how often it then asks the store who holds what it waits for.
const (
	waitShown   = time.Second
	waitRecheck = 5 * time.Second
)

// showWait says, while dlock run or elect waits for what (`lock "x"`),
// that it waits and for whom, as who (the holder, " (held by …)", or "")
// tells: on a terminal (stderr, text output) one line, redrawn every second
// with the time waited; elsewhere, with -v, a line (a JSON event with -o
// json) each time what it sees changes. A wait on a store gone silent
// after Open said nothing until interrupted (an adversary pass); now it
// says the store does not answer. stop ends the display, its line cleared,
// before the command starts or an error is printed.
func showWait(what, name string, who func(context.Context) (string, error)) (stop func()) {
	tty := !jsonOutput() && writerIsTerminal(os.Stderr)
	if !tty && global.verbose == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	var mu sync.Mutex // the display's output, and whether it is stopped
	stopped, drawn := false, false
	go func() {
		defer close(finished)
		start := time.Now()
		tick := time.NewTimer(waitShown)
		defer tick.Stop()
		var state, shown string
		var asked time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if asked.IsZero() || time.Since(asked) >= waitRecheck {
				asked = time.Now()
				state = waitState(ctx, who)
			}
			mu.Lock()
			if stopped || ctx.Err() != nil { // stopped while asking: the answer is not shown
				mu.Unlock()
				return
			}
			if tty {
				line := fmt.Sprintf("dlock: waiting %v for %s%s", time.Since(start).Truncate(time.Second), what, state)
				if cols, _ := terminalSize(os.Stderr); cols > 1 {
					line = cutWidth(line, cols-1) // one row, or \r would not clear it
				}
				fmt.Fprint(os.Stderr, "\r\x1b[K"+line)
				drawn = true
			} else if key := timeLeftText.ReplaceAllString(state, ""); key != shown {
				shown = key // a change of holder or of answer, not of time left
				report(struct {
					Event string `json:"event"`
					Name  string `json:"name"`
					State string `json:"state"`
				}{"waiting", name, strings.TrimLeft(state, ": ")}, "waiting for "+what+state)
			}
			mu.Unlock()
			tick.Reset(time.Second)
		}
	}()
	return func() {
		cancel()
		// An inspection in flight on a store gone silent is not waited
		// out: go-redis ends a read at its deadline, not when its context
		// is cancelled, so a SIGTERM waited up to --connect-timeout here.
		// The display goroutine, once its read returns, sees it is stopped
		// and writes nothing.
		select {
		case <-finished:
		case <-time.After(stopWait):
		}
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		if drawn {
			fmt.Fprint(os.Stderr, "\r\x1b[K")
		}
	}
}

// stopWait is how long stopping the wait display waits for an inspection
// in flight.
const stopWait = 100 * time.Millisecond

// timeLeftText is the time left that a holder's text (holderText) ends
// with, which changes at every read.
var timeLeftText = regexp.MustCompile(`, (?:[0-9.]+(?:h|m|s|ms|µs|ns))+ left|, time left unknown`)

// waitState is who's answer as the display shows it: the holder, nothing
// for a free lock or a store that cannot say, or that the store does not
// answer (or failed) within --connect-timeout.
func waitState(ctx context.Context, who func(context.Context) (string, error)) string {
	ctx, cancel := context.WithTimeout(ctx, global.connectTimeout)
	defer cancel()
	holder, err := who(ctx)
	switch {
	case err == nil:
		return holder
	case errors.Is(err, dlock.ErrUnsupported):
		return ""
	case noAnswer(err):
		return ": the store does not answer"
	}
	return ": cannot inspect: " + strings.TrimPrefix(err.Error(), "dlock: ")
}

// cutWidth cuts s to at most n runes, with "…" at the end when cut.
func cutWidth(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
