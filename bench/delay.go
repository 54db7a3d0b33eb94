package main

import (
	"io"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/dlock/dlock/internal/testserver"
)

// The real-network scenario (issue #29): the uncontended scenario with
// every store behind a TCP proxy in the parent process that delays each
// byte by netDelay each way, as a network between a service and its store
// does. On loopback a Lock+Unlock costs CPU only; there, each round trip
// costs 2·netDelay more, so the libraries' ratios show what their round
// trips, not their CPU, cost.

const (
	// delayedScenario is its name, in -scenarios and the results.
	delayedScenario = "uncontended 0.5ms"
	// netDelay is the proxy's delay each way: at least that, plus the
	// scheduler's lateness, which a loaded machine makes larger.
	netDelay = 500 * time.Microsecond
)

// proxied maps the address of each delaying proxy the parent started to
// its server's, so that the server's CPU is still the server's.
var proxied = map[string]string{}

// delayedServers starts, for each store of srv, a proxy that delays
// every byte by d each way, and returns the proxies' addresses in place of
// the servers'. The proxies stop when e closes.
func delayedServers(e *env, srv servers, d time.Duration) servers {
	via := func(addr string) string {
		if addr == "" {
			return ""
		}
		p := testserver.NewProxy(e, addr)
		p.SetDelay(d)
		proxied[p.Addr()] = addr
		return p.Addr()
	}
	out := servers{Redis: via(srv.Redis), ZooKeeper: via(srv.ZooKeeper), NATS: via(srv.NATS)}
	if srv.Etcd != "" { // a URL: proxy its host:port
		u, err := url.Parse(srv.Etcd)
		if err != nil {
			e.Fatalf("etcd URL %q: %v", srv.Etcd, err)
		}
		real := u.String()
		u.Host = via(u.Host)
		out.Etcd = u.String()
		proxied[out.Etcd] = real
	}
	return out
}

// proxyRoundTrip measures what a delaying proxy adds on this machine at
// this moment, which the scheduler's lateness makes more than 2·d: the
// median of n one-byte round trips through a proxy delaying d each way to
// an echo server in this process.
func proxyRoundTrip(e *env, d time.Duration, n int) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() { // one connection, echoed until it closes
		defer close(done)
		if c, err := ln.Accept(); err == nil {
			_, _ = io.Copy(c, c)
			_ = c.Close()
		}
	}()
	p := testserver.NewProxy(e, ln.Addr().String())
	defer func() { p.Close(); _ = ln.Close(); <-done }()
	p.SetDelay(d)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	took := make([]time.Duration, n)
	b := []byte{0}
	for i := range took {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return 0, err
		}
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took[n/2], nil
}
