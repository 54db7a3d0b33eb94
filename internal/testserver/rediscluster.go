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
	return startRedisCluster(t, n, redisClusterSpec{
		name:  "redis-server (cluster)",
		ready: redisReady,
		dial:  plainDial,
		args: func(port int, dir string) []string {
			return append([]string{"--port", strconv.Itoa(port)}, clusterNodeArgs(dir)...)
		},
	})
}

// RedisClusterReplicated starts masters redis-servers in cluster mode and
// one replica of each, and joins them: masters*2 nodes, the masters first
// (as redis-cli --cluster create assigns them, no fixed order beyond that
// is promised: ask a node's ROLE). A replica may fail over at any time
// (cluster-replica-validity-factor 0), so a test can kill or pause a
// master and see its replica promoted after the 2 s node timeout.
func RedisClusterReplicated(t TB, masters int) []*Server {
	t.Helper()
	return startRedisCluster(t, masters*2, redisClusterSpec{
		name:     "redis-server (cluster with replicas)",
		ready:    redisReady,
		dial:     plainDial,
		replicas: 1,
		args: func(port int, dir string) []string {
			return append(append([]string{"--port", strconv.Itoa(port)}, clusterNodeArgs(dir)...),
				"--cluster-replica-validity-factor", "0", "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
		},
	})
}

// redisClusterSpec is what a plain and a TLS Redis Cluster differ in.
type redisClusterSpec struct {
	name     string                                                   // of each node
	replicas int                                                      // of each master
	ready    func(ctx context.Context, addr string) error             // a node's readiness check
	dial     func(ctx context.Context, addr string) (net.Conn, error) // to a node, for CLUSTER INFO
	args     func(port int, dir string) []string                      // a node's redis-server arguments
	cli      []string                                                 // redis-cli's, before --cluster create
}

// clusterNodeArgs are the redis-server arguments of a cluster node,
// whatever its port: loopback only, no persistence.
func clusterNodeArgs(dir string) []string {
	return []string{"--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", "",
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"}
}

// startRedisCluster starts n nodes as sp says, joins them, and waits until
// every node reports the cluster ok.
func startRedisCluster(t TB, n int, sp redisClusterSpec) []*Server {
	t.Helper()
	bin := LookBinary(t, "redis-server")
	cli := LookBinary(t, "redis-cli")
	nodes := make([]*Server, n)
	for i := range nodes {
		s := &Server{Name: sp.name, bin: bin, ready: sp.ready, args: sp.args, Dir: t.TempDir(), Host: "127.0.0.1"}
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
	args := append(append([]string(nil), sp.cli...), "--cluster", "create")
	for _, s := range nodes {
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(sp.replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, tail(string(out)))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		for clusterState(sp.dial, s.Addr()) != "ok" {
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok after 30s at %s", s.Addr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Every replica is linked to its master, so that a failover has
	// something to promote.
	for linked := 0; linked < n*sp.replicas/(sp.replicas+1); {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replicas linked to their masters after 30s", linked, n*sp.replicas/(sp.replicas+1))
		}
		time.Sleep(50 * time.Millisecond)
		linked = 0
		for _, s := range nodes {
			if infoField(sp.dial, s.Addr(), "INFO replication", "master_link_status") == "up" {
				linked++
			}
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

// clusterState returns the cluster_state field of CLUSTER INFO, asked
// over a connection from dial.
func clusterState(dial func(ctx context.Context, addr string) (net.Conn, error), addr string) string {
	return infoField(dial, addr, "CLUSTER INFO", "cluster_state")
}

// infoField returns field of the INFO-like reply to command (a bulk
// string of "field:value" lines), asked over a connection from dial.
func infoField(dial func(ctx context.Context, addr string) (net.Conn, error), addr, command, field string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := dial(ctx, addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(conn, command+"\r\n")
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // $<len>
		return ""
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ""
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
}
