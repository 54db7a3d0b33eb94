package testserver

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// Memcached starts a private memcached with eviction disabled (-M).
func Memcached(t TB) *Server {
	t.Helper()
	s := &Server{Name: "memcached", bin: LookBinary(t, "memcached")}
	s.args = func(port int, _ string) []string {
		args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-M", "-m", "64"}
		if os.Geteuid() == 0 { // memcached will not run as root without -u
			args = append(args, "-u", "nobody")
		}
		return args
	}
	s.ready = memcachedReady
	s.start(t)
	return s
}

func memcachedReady(ctx context.Context, addr string) error {
	conn, err := plainDial(ctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	return memcachedVersion(conn)
}

// memcachedVersion asks memcached's version on conn and wants an answer.
func memcachedVersion(conn net.Conn) error {
	fmt.Fprint(conn, "version\r\n")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VERSION") {
		return fmt.Errorf("version answered %q", strings.TrimSpace(line))
	}
	return nil
}
