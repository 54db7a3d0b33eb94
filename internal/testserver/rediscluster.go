package testserver

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// RedisCluster starts n redis-servers in cluster mode (masters only) and
// joins them with redis-cli --cluster create. Each node's cluster bus is on
// its port + 10000, so ports are picked below 55535 with both free.
func RedisCluster(t TB, n int) []*Server {
	t.Helper()
	bin := LookBinary(t, "redis-server")
	cli := LookBinary(t, "redis-cli")
	nodes := make([]*Server, n)
	for i := range nodes {
		s := &Server{Name: "redis-server (cluster)", bin: bin, ready: redisReady, Dir: t.TempDir(), Host: "127.0.0.1"}
		s.args = func(port int, dir string) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
				"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"}
		}
		var err error
		for range 5 {
			s.Port = clusterPort()
			if err = s.Start(); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("start cluster node: %v", err)
		}
		t.Cleanup(s.Stop)
		nodes[i] = s
	}
	args := []string{"--cluster", "create"}
	for _, s := range nodes {
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, tail(string(out)))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		for clusterState(s.Addr()) != "ok" {
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok after 30s at %s", s.Addr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// clusterPort returns a port in [20000, 55535) that is free, as is its
// cluster bus port.
func clusterPort() int {
	for {
		p := 20000 + rand.IntN(35535)
		if free(p) && free(p+10000) {
			return p
		}
	}
}

func free(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// clusterState returns the cluster_state field of CLUSTER INFO.
func clusterState(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(conn, "CLUSTER INFO\r\n")
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // $<len>
		return ""
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ""
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_state:"); ok {
			return v
		}
	}
}
