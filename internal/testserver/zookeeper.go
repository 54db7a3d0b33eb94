package testserver

import (
	"context"
	"fmt"
	"io"
	"net"
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
	java := LookBinary(t, "java")
	if _, err := os.Stat("/usr/share/java/zookeeper.jar"); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("zookeeper.jar not found and %s=1: run scripts/install-deps.sh", RequireEnv)
		}
		t.Skipf("zookeeper.jar not found: run scripts/install-deps.sh (package zookeeper)")
	}
	s := &Server{Name: "zookeeper", bin: java}
	s.args = func(port int, dir string) []string {
		cfg := filepath.Join(dir, "zoo.cfg")
		body := fmt.Sprintf("tickTime=250\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n",
			filepath.Join(dir, "data"), port)
		_ = os.WriteFile(cfg, []byte(body), 0o600)
		return []string{"-Xmx256m", "-cp", zkClasspath, "-Dzookeeper.log.dir=" + dir,
			"org.apache.zookeeper.server.ZooKeeperServerMain", cfg}
	}
	s.ready = zkReady
	s.start(t)
	return s
}

// zkReady sends the srvr command and wants a Mode line: ruok answers imok
// before the server serves sessions.
func zkReady(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return err
	}
	b, _ := io.ReadAll(conn)
	if !strings.Contains(string(b), "Mode: ") {
		return fmt.Errorf("srvr answered %q", b)
	}
	return nil
}

var _ = strconv.Itoa
