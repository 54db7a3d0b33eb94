package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// serverCPU returns the CPU time the store's server has used so far: the
// process listening on its port (Redis, ZooKeeper's JVM), or, for etcd,
// which is embedded in this process, this process's own (the parent is
// idle while a child runs, so it is the server's; not known when the
// parent also runs a delaying proxy to it). Linux only; zero and false
// elsewhere.
func serverCPU(srv servers, store string) (time.Duration, bool) {
	if store == "etcd" {
		if _, ok := proxied[srv.Etcd]; ok { // the delaying proxy's CPU is this process's too
			return 0, false
		}
		return cpuTime(), true
	}
	addr := map[string]string{"redis": srv.Redis, "zookeeper": srv.ZooKeeper, "nats": srv.NATS}[store]
	if real, ok := proxied[addr]; ok { // behind a delaying proxy (delay.go): the server's, not the proxy's
		addr = real
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, false
	}
	pid, ok := listenerPID(port)
	if !ok {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command's closing parenthesis; utime and stime are
	// the 14th and 15th of the line, in clock ticks (100 per second).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond, true
}

var pidOfPort = map[string]int{}

// listenerPID finds the process listening on a TCP port of loopback.
func listenerPID(port string) (int, bool) {
	if pid, ok := pidOfPort[port]; ok {
		return pid, true
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0, false
	}
	want := fmt.Sprintf(":%04X", p)
	inode := ""
	for _, tab := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(tab)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 9 && strings.HasSuffix(f[1], want) && f[3] == "0A" { // LISTEN
				inode = f[9]
			}
		}
	}
	if inode == "" {
		return 0, false
	}
	target := "socket:[" + inode + "]"
	dirs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, d := range dirs {
		if l, err := os.Readlink(d); err == nil && l == target {
			pid, err := strconv.Atoi(strings.Split(d, "/")[2])
			if err == nil {
				pidOfPort[port] = pid
				return pid, true
			}
		}
	}
	return 0, false
}
