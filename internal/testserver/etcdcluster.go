package testserver

import (
	"strconv"
	"strings"
	"time"
)

// EtcdCluster starts a private n-member etcd cluster from the etcd binary,
// every member a process of its own (so a member can be killed with
// SIGKILL, as a crash would, and started again on its data). election is the
// members' Raft election timeout, with a heartbeat of a tenth of it; etcd's
// default when zero.
func EtcdCluster(t TB, n int, election time.Duration) []*Server {
	t.Helper()
	bin := LookBinary(t, "etcd")
	var err error
	for range 3 {
		var members []*Server
		if members, err = startEtcdCluster(t, bin, n, election); err == nil {
			return members
		}
		// A port picked free was taken before a member bound it (the
		// packages' tests run side by side): pick new ones, as start does
		// for one server (a clean-clone make test failed on it).
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("etcd cluster: %v", err)
	return nil
}

// startEtcdCluster is one try of EtcdCluster: its members stopped again if
// one of them fails to start.
func startEtcdCluster(t TB, bin string, n int, election time.Duration) ([]*Server, error) {
	members := make([]*Server, n)
	peers := make([]string, n)
	for i := range members {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		peer, err := FreePort()
		if err != nil {
			return nil, err
		}
		name := "m" + strconv.Itoa(i)
		peers[i] = name + "=http://127.0.0.1:" + strconv.Itoa(peer)
		members[i] = &Server{Name: "etcd " + name, bin: bin, Host: "127.0.0.1", Port: port, Dir: t.TempDir(),
			ready: etcdReady}
	}
	for i, s := range members {
		name, purl, _ := strings.Cut(peers[i], "=")
		s.args = func(port int, dir string) []string {
			curl := "http://127.0.0.1:" + strconv.Itoa(port)
			args := []string{"--name", name, "--data-dir", dir + "/data",
				"--listen-client-urls", curl, "--advertise-client-urls", curl,
				"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
				"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-token", "dlocktest",
				"--log-level", "error"}
			if election > 0 {
				args = append(args, "--election-timeout", strconv.Itoa(int(election/time.Millisecond)),
					"--heartbeat-interval", strconv.Itoa(int(max(election/10, time.Millisecond)/time.Millisecond)))
			}
			return args
		}
	}
	errc := make(chan error, n)
	for _, s := range members { // a member is ready once a quorum is: start them together
		go func() { errc <- s.Start() }()
	}
	var failed error
	for range members {
		if err := <-errc; err != nil && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		for _, s := range members {
			s.Stop()
		}
		return nil, failed
	}
	for _, s := range members {
		t.Cleanup(s.Stop)
	}
	return members, nil
}
