package testserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// RedisSentinel starts a Redis Sentinel monitoring master under the name
// masterName (quorum 1).
func RedisSentinel(t TB, master *Server, masterName string) *Server {
	t.Helper()
	s := &Server{Name: "redis-sentinel", bin: LookBinary(t, "redis-server")}
	s.args = func(port int, dir string) []string {
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s %s %d 1\nsentinel down-after-milliseconds %s 1000\n",
			port, dir, masterName, master.Host, master.Port, masterName)
		_ = os.WriteFile(conf, []byte(body), 0o600)
		return []string{conf, "--sentinel", "--port", strconv.Itoa(port)}
	}
	s.ready = redisReady
	s.start(t)
	return s
}
