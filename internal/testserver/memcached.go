package testserver

import (
	"bufio"
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
	s.args = func(port int, _ string) []string { return memcachedArgs(port) }
	s.ready = probeReady(plainDial, memcachedVersion)
	s.start(t)
	return s
}

// memcachedArgs are memcached's arguments for port on loopback, with
// eviction disabled, then extra.
func memcachedArgs(port int, extra ...string) []string {
	args := append([]string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-M", "-m", "64"}, extra...)
	if os.Geteuid() == 0 { // memcached will not run as root without -u
		args = append(args, "-u", "nobody")
	}
	return args
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
