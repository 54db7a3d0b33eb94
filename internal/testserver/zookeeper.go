package testserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// zkClasspath is Debian's zookeeper package's classpath.
const zkClasspath = "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar"

// ZooKeeper starts a private standalone ZooKeeper (Debian's zookeeper
// package, run with java) with tickTime 250ms, so session timeouts from
// 500ms to 5s are allowed.
func ZooKeeper(t TB) *Server {
	t.Helper()
	return startZooKeeper(t)
}

// startZooKeeper starts the standalone ZooKeeper of ZooKeeper, with props
// (-Dkey=value) added to the JVM's system properties.
func startZooKeeper(t TB, props ...string) *Server {
	t.Helper()
	java := zkJava(t)
	s := &Server{Name: "zookeeper", bin: java}
	s.args = func(port int, dir string) []string {
		cfg := filepath.Join(dir, "zoo.cfg")
		body := fmt.Sprintf("tickTime=250\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n",
			filepath.Join(dir, "data"), port)
		_ = os.WriteFile(cfg, []byte(body), 0o600)
		args := append([]string{"-Xmx256m", "-cp", zkClasspath, "-Dzookeeper.log.dir=" + dir}, props...)
		return append(args, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	}
	s.ready = zkReady
	s.start(t)
	return s
}

// ZooKeeperEnsemble starts an ensemble of n ZooKeeper servers on loopback
// (QuorumPeerMain, tickTime 250ms) and waits until it has a leader and every
// member serves. Members can be killed and restarted on the same ports and
// data; ZooKeeperMode tells the leader from the followers.
func ZooKeeperEnsemble(t TB, n int) []*Server {
	t.Helper()
	java := zkJava(t)
	ports := make([]int, 3*n) // client, peer and election port of each member
	seen := map[int]bool{}
	for i := range ports {
		for {
			p, err := FreePort()
			if err != nil {
				t.Fatalf("free port: %v", err)
			}
			if !seen[p] {
				seen[p], ports[i] = true, p
				break
			}
		}
	}
	members := ""
	for i := range n {
		members += fmt.Sprintf("server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
	}
	servers := make([]*Server, n)
	for i := range servers {
		s := &Server{Name: fmt.Sprintf("zookeeper %d/%d", i+1, n), bin: java, Dir: t.TempDir(), Host: "127.0.0.1", Port: ports[3*i]}
		data := filepath.Join(s.Dir, "data")
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o600); err != nil {
			t.Fatalf("%v", err)
		}
		s.args = func(port int, dir string) []string {
			cfg := filepath.Join(dir, "zoo.cfg")
			body := fmt.Sprintf("tickTime=250\ninitLimit=40\nsyncLimit=8\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
				"admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n%s", data, port, members)
			_ = os.WriteFile(cfg, []byte(body), 0o600)
			return []string{"-Xmx192m", "-cp", zkClasspath, "-Dzookeeper.log.dir=" + dir,
				"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg}
		}
		// A member answers srvr as soon as it listens, serving or not; the
		// ensemble's readiness is checked below, once all are up.
		s.ready = func(ctx context.Context, addr string) error { _, err := zkSrvr(ctx, plainDial, addr); return err }
		if err := s.Start(); err != nil {
			t.Fatalf("start %s: %v", s.Name, err)
		}
		t.Cleanup(s.Stop)
		servers[i] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := ZooKeeperServing(ctx, s); err != nil {
			t.Fatalf("%s: %v: %s", s.Name, err, tail(s.Log()))
		}
	}
	return servers
}

// ZooKeeperServing waits until the ensemble member s serves as leader or
// follower, or ctx ends. A member that was restarted answers srvr as soon
// as it listens, before it has synced with the leader; it serves once it
// has.
func ZooKeeperServing(ctx context.Context, s *Server) error {
	for {
		m := ZooKeeperMode(s)
		if m == "leader" || m == "follower" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not serving (mode %q): %w", m, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ZooKeeperMode returns what a ZooKeeper server says it is: "leader",
// "follower", "standalone", or "" when it is down or not serving.
func ZooKeeperMode(s *Server) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := zkSrvr(ctx, plainDial, s.Addr())
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

func zkJava(t TB) string {
	t.Helper()
	java := LookBinary(t, "java")
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("zookeeper.jar not found and %s=1: run scripts/install-deps.sh", RequireEnv)
		}
		t.Skipf("zookeeper.jar not found: run scripts/install-deps.sh (package zookeeper)")
	}
	return java
}

// zkReady sends the srvr command and wants a Mode line: ruok answers imok
// before the server serves sessions.
var zkReady = zkReadyOver(plainDial)

// zkReadyOver is zkReady over connections made with dial.
func zkReadyOver(dial dialFunc) func(ctx context.Context, addr string) error {
	return func(ctx context.Context, addr string) error {
		out, err := zkSrvr(ctx, dial, addr)
		if !strings.Contains(out, "Mode: ") {
			return fmt.Errorf("srvr answered %q (%v)", out, err)
		}
		return nil
	}
}

// zkSrvr sends the srvr four-letter command on a connection made with dial,
// within 2 s, and returns the answer.
func zkSrvr(ctx context.Context, dial dialFunc, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := dial(ctx, addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	if len(b) == 0 && err == nil {
		err = fmt.Errorf("srvr: empty answer")
	}
	return string(b), err
}
