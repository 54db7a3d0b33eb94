package testserver

import (
	"context"
	"net"
	"strconv"
)

// Redis starts a private redis-server with no persistence. extra are more
// "--name value" arguments, e.g. "--maxmemory-policy", "allkeys-lru".
func Redis(t TB, extra ...string) *Server {
	t.Helper()
	s := &Server{Name: "redis-server", bin: LookBinary(t, "redis-server")}
	s.args = func(port int, dir string) []string {
		return append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "yes",
			"--logfile", "",
		}, extra...)
	}
	s.ready = redisReady
	s.start(t)
	return s
}

// redisReady sends PING and wants PONG, which Redis answers only once it has
// loaded its data.
var redisReady = probeReady(plainDial, redisPing)

// probeReady is a readiness check that connects with dial and asks probe on
// the connection.
func probeReady(dial dialFunc, probe func(net.Conn) error) func(ctx context.Context, addr string) error {
	return func(ctx context.Context, addr string) error {
		conn, err := dial(ctx, addr)
		if err != nil {
			return err
		}
		defer conn.Close()
		return probe(conn)
	}
}

// dialFunc connects to a server's addr, the connection bounded by ctx's
// deadline: plainDial, or tlsDial's.
type dialFunc = func(ctx context.Context, addr string) (net.Conn, error)

// plainDial dials addr over TCP, the connection bounded by ctx's deadline.
func plainDial(ctx context.Context, addr string) (net.Conn, error) {
	return boundedDial(ctx, &net.Dialer{}, addr)
}

// boundedDial dials addr over TCP with d, the connection bounded by ctx's
// deadline.
func boundedDial(ctx context.Context, d interface {
	DialContext(ctx context.Context, network, addr string) (net.Conn, error)
}, addr string) (net.Conn, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return conn, nil
}
