package faults

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// proc is a running worker process, in its own process group.
type proc struct {
	id   int
	cmd  *exec.Cmd
	exit chan struct{}
	out  *bytes.Buffer // what it printed (stdout and stderr)

	mu     sync.Mutex
	paused bool
}

// startWorker starts bin as worker cfg.
func startWorker(bin string, cfg WorkerConfig) (*proc, error) {
	cmd := exec.Command(bin, "worker",
		"-id", strconv.Itoa(cfg.ID), "-url", cfg.URL, "-name", cfg.Name, "-ttl", cfg.TTL.String(),
		"-hold", cfg.Hold.String(), "-long", cfg.LongMax.String(), "-checker", cfg.Checker,
		"-lock", cfg.Lock, "-permits", strconv.Itoa(cfg.Permits))
	p := &proc{id: cfg.ID, cmd: cmd, exit: make(chan struct{}), out: &bytes.Buffer{}}
	cmd.Stdout, cmd.Stderr = &lockedWriter{b: p.out, mu: &p.mu}, &lockedWriter{b: p.out, mu: &p.mu}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("faults: start worker %d: %w", cfg.ID, err)
	}
	go func() {
		if err := cmd.Wait(); err != nil {
			p.mu.Lock()
			fmt.Fprintf(p.out, "exit: %v", err)
			p.mu.Unlock()
		}
		close(p.exit)
	}()
	return p, nil
}

func (p *proc) signal(sig syscall.Signal) { _ = syscall.Kill(-p.cmd.Process.Pid, sig) }

// pause stops the worker (SIGSTOP), resume continues it.
func (p *proc) pause() {
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	p.signal(syscall.SIGSTOP)
}

func (p *proc) resume() {
	p.signal(syscall.SIGCONT)
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// kill kills it at once (kill -9) and waits for it.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.exit
}

// stop asks it to finish (SIGTERM), and kills it if it has not within
// grace. It returns what it printed.
func (p *proc) stop(grace time.Duration) string {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.exit:
	case <-time.After(grace):
		p.kill()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// lockedWriter serialises writes to a buffer shared by two pipes.
type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.b.Len() > 64<<10 {
		return len(b), nil
	}
	return w.b.Write(b)
}

// sigLong asks a worker to make its current (or next) hold last until
// loss; sigRelease ends such a hold.
const (
	sigLong    = syscall.SIGUSR1
	sigRelease = syscall.SIGUSR2
)
