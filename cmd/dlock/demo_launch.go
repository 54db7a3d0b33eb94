package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock/dlock/internal/syncbuf"
)

// Launching the demo's app instances (child processes of dlock) and the
// balancer in front of them.

// startInstances starts the app instances, each this binary re-executed,
// and returns their addresses, a function that stops them and one that
// reports an instance that died, with what it printed.
func startInstances(ctx context.Context, cfg demoConfig, backendURL, storeURL string) ([]string, func(), func() error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, func() {}, nil, fail(exitFailed, "%v", err)
	}
	type proc struct {
		cmd    *exec.Cmd
		exited chan struct{}
		stderr *syncBuffer
	}
	var procs []proc
	stop := func() {
		for _, p := range procs {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			select {
			case <-p.exited:
			case <-time.After(3 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
	}
	alive := func() error {
		for _, p := range procs {
			select {
			case <-p.exited:
				return fmt.Errorf("an instance died: %s", tail(p.stderr.String()))
			default:
			}
		}
		return nil
	}
	var addrs []string
	for range cfg.instances {
		// The URLs, which may hold passwords, go by the environment, not
		// the command line that every local user can read.
		c := exec.Command(exe, "__demo-instance", "--segments", fmt.Sprint(cfg.segments))
		c.Env = append(os.Environ(), "DLOCK_URL="+backendURL, "DLOCK_DEMO_STORE="+storeURL)
		c.SysProcAttr = childSysProcAttr() // never outlive the demo (on Linux)
		stderr := &syncBuffer{}
		c.Stderr = stderr
		stdout, err := c.StdoutPipe()
		if err != nil {
			return nil, stop, alive, fail(exitFailed, "%v", err)
		}
		if err := c.Start(); err != nil {
			return nil, stop, alive, fail(exitFailed, "start instance: %v", err)
		}
		p := proc{cmd: c, exited: make(chan struct{}), stderr: stderr}
		procs = append(procs, p)
		go func() { _ = c.Wait(); close(p.exited) }()
		line := make(chan string, 1)
		go func() {
			s := bufio.NewScanner(stdout)
			if s.Scan() {
				line <- s.Text()
			}
			close(line)
			_, _ = io.Copy(io.Discard, stdout)
		}()
		select {
		case l, ok := <-line:
			addr, found := strings.CutPrefix(l, "listening ")
			if !ok || !found {
				<-p.exited
				return nil, stop, alive, fail(exitUsage, "instance failed: %s", tail(stderr.String()))
			}
			addrs = append(addrs, addr)
		case <-time.After(30 * time.Second):
			return nil, stop, alive, fail(exitFailed, "instance did not start in 30s: %s", tail(stderr.String()))
		case <-ctx.Done():
			return nil, stop, alive, fail(exitFailed, "interrupted")
		}
	}
	return addrs, stop, alive, nil
}

// syncBuffer is a bytes.Buffer safe for the writer and a reader.
type syncBuffer = syncbuf.Buffer

// tail returns the last line of s, an instance's last words.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// balancer stands in for an nginx upstream: round-robin over the instances.
type balancer struct {
	Addr string
	srv  *http.Server
}

func startBalancer(addrs []string) (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var next atomic.Uint64
	targets := make([]*url.URL, len(addrs))
	for i, a := range addrs {
		targets[i] = &url.URL{Scheme: "http", Host: a}
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[(next.Add(1)-1)%uint64(len(targets))])
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
		ErrorLog:  log.New(io.Discard, "", 0), // failed requests are counted as errors
	}
	b := &balancer{Addr: ln.Addr().String(), srv: &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *balancer) Close() { _ = b.srv.Close() }
