package testserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EtcdCluster starts an n-member etcd cluster on loopback (the etcd binary)
// and waits until every member is healthy. Members can be killed and
// restarted on the same ports and data dirs; EtcdIsLeader tells the leader.
func EtcdCluster(t TB, n int) []*Server {
	t.Helper()
	bin := LookBinary(t, "etcd")
	ports := make([]int, 2*n) // client and peer port of each member
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
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
	}
	servers := make([]*Server, n)
	for i := range servers {
		name := "m" + strconv.Itoa(i+1)
		purl := "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1])
		s := &Server{Name: fmt.Sprintf("etcd %d/%d", i+1, n), bin: bin, Dir: t.TempDir(), Host: "127.0.0.1", Port: ports[2*i]}
		s.args = func(port int, dir string) []string {
			curl := "http://127.0.0.1:" + strconv.Itoa(port)
			return []string{"--name", name, "--data-dir", dir + "/data",
				"--listen-client-urls", curl, "--advertise-client-urls", curl,
				"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
				"--initial-cluster-token", "dlocktest", "--log-level", "error"}
		}
		// A member serves clients only once a majority is up: it is
		// ready when it listens, and the cluster's health is checked
		// below, once all are up.
		s.ready = func(ctx context.Context, addr string) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err == nil {
				_ = c.Close()
			}
			return err
		}
		if err := s.Start(); err != nil {
			t.Fatalf("start %s: %v", s.Name, err)
		}
		t.Cleanup(s.Stop)
		servers[i] = s
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, s := range servers {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := etcdReady(ctx, s.Addr())
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not healthy after 60s: %v: %s", s.Name, err, tail(s.Log()))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return servers
}

// EtcdIsLeader says whether the etcd member s is its cluster's leader (false
// when it is down).
func EtcdIsLeader(s *Server) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	body, err := etcdGet(ctx, s.Addr(), "/metrics")
	return err == nil && strings.Contains(body, "\netcd_server_is_leader 1")
}

func etcdGet(ctx context.Context, addr, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
