package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dlock/dlock/faults"
)

// progress shows where a long run is: on a terminal, a status line
// rewritten in place; elsewhere, one line per step.
type progress struct {
	w     io.Writer
	tty   bool
	total int
	start time.Time

	mu   sync.Mutex
	done int
}

func newProgress(f *os.File, total int) *progress {
	fi, err := f.Stat()
	return &progress{w: f, tty: err == nil && fi.Mode()&os.ModeCharDevice != 0, total: total, start: time.Now()}
}

func (p *progress) prefix() string {
	return fmt.Sprintf("[%d/%d %v]", p.done, p.total, time.Since(p.start).Round(time.Second))
}

// status shows what the suite is doing now.
func (p *progress) status(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := p.prefix() + " " + fmt.Sprintf(format, args...)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// result records a finished scenario.
func (p *progress) result(r faults.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "%s %s × %s: %s\n", p.prefix(), r.Backend, r.Fault, faults.Verdict(r))
	if r.Output != "" && r.Output != "[]" {
		fmt.Fprintf(p.w, "    workers said: %s\n", r.Output)
	}
}

// done ends the status line.
func (p *progress) finish() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
