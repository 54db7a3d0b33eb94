package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsModule is the nats-server module the tests run, as pinned in go.mod;
// NATSProcess builds its main package into a cached binary.
const natsModule = "github.com/nats-io/nats-server/v2"

// NATSInProcess starts a nats-server with JetStream inside the test
// process, on a free loopback port with its store in a temp dir, and returns
// its client URL. Enough for tests that need not pause or kill the server;
// those use NATSProcess.
func NATSInProcess(t TB) string {
	t.Helper()
	return NATSServer(t, &server.Options{ServerName: "dlocktest"}).ClientURL()
}

// NATSServer starts, inside the test process, a nats-server with the
// caller's options (accounts, operators, a name) and JetStream, on a free
// loopback port with its store in a temp dir and its logs off, and shuts it
// down when the test ends.
func NATSServer(t TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.JetStream = "127.0.0.1", server.RANDOM_PORT, true
	opts.StoreDir, opts.NoLog, opts.NoSigs = t.TempDir(), true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		t.Fatalf("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

var natsBin struct {
	once sync.Once
	path string
	err  error
}

// natsBinary builds nats-server at the version this binary was built with
// (go.mod's), once per process, into the user's cache dir (reused while
// the version is the same).
func natsBinary(t TB) string {
	t.Helper()
	natsBin.once.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		dir = filepath.Join(dir, "dlock-testserver")
		version := ""
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, m := range bi.Deps {
				if m.Path == natsModule {
					version = m.Version
					if m.Replace != nil {
						version = m.Replace.Version
					}
				}
			}
		}
		if version == "" { // test binaries carry no module list: ask go.mod
			out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", natsModule).Output()
			if err != nil {
				natsBin.err = fmt.Errorf("go list -m %s: %v", natsModule, err)
				return
			}
			version = strings.TrimSpace(string(out))
		}
		path := filepath.Join(dir, "nats-server-"+version)
		if _, err := os.Stat(path); err == nil {
			natsBin.path = path
			return
		}
		// go install works in any directory (a worker process of the fault
		// suite runs outside the module), from the module cache or proxy.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			natsBin.err = err
			return
		}
		tmp, err := os.MkdirTemp(dir, "build-")
		if err != nil {
			natsBin.err = err
			return
		}
		defer os.RemoveAll(tmp)
		cmd := exec.Command("go", "install", natsModule+"@"+version)
		cmd.Env = append(os.Environ(), "GOBIN="+tmp)
		cmd.Dir = tmp
		if b, err := cmd.CombinedOutput(); err != nil {
			natsBin.err = fmt.Errorf("go install %s@%s: %v: %s", natsModule, version, err, tail(string(b)))
			return
		}
		natsBin.err = os.Rename(filepath.Join(tmp, "nats-server"), path)
		natsBin.path = path
	})
	if natsBin.err != nil {
		t.Fatalf("nats-server: %v", natsBin.err)
	}
	return natsBin.path
}

// NATSConfig is extra nats-server configuration (its config-file syntax),
// such as an authorization or tls block, for NATSProcess.
type NATSConfig string

// NATSProcess starts nats-server with JetStream as a process of its own
// (built from the module in go.mod), on a free loopback port with its store
// in a temp dir, so that a test can pause, kill and restart it. conf, if
// any, is added to its config file.
func NATSProcess(t TB, conf ...NATSConfig) *Server {
	t.Helper()
	s := &Server{Name: "nats-server", bin: natsBinary(t)}
	s.args = func(port int, dir string) []string {
		return []string{"-c", writeNATSConf(t, dir, port, "", conf)}
	}
	s.ready = natsReady
	s.start(t)
	return s
}

// NATSCluster starts an n-node JetStream cluster, every node a process of
// its own, for R3 buckets and leader-kill tests. A cluster that has not
// formed within 45 s (a clean-clone run once saw no JetStream metadata
// leader for 60 s, on a loaded machine with other packages' servers
// starting beside it) is stopped and started again, once, on new ports.
func NATSCluster(t TB, n int) []*Server {
	t.Helper()
	bin := natsBinary(t)
	nodes, first := startNATSCluster(t, bin, n)
	if first == nil {
		return nodes
	}
	nodes, err := startNATSCluster(t, bin, n)
	if err != nil {
		t.Fatalf("nats cluster: %v (and before, on other ports: %v)", err, first)
	}
	return nodes
}

// startNATSCluster is one attempt of NATSCluster; on failure its nodes
// are stopped.
func startNATSCluster(t TB, bin string, n int) ([]*Server, error) {
	nodes := make([]*Server, n)
	routes := make([]string, n)
	cports := make([]int, n)
	for i := range nodes {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		if cports[i], err = FreePort(); err != nil {
			return nil, err
		}
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(cports[i])
		nodes[i] = &Server{Name: "nats-server n" + strconv.Itoa(i), bin: bin, Host: "127.0.0.1", Port: port,
			Dir: t.TempDir(), ready: natsReady}
	}
	stop := func() {
		for _, s := range nodes {
			s.Stop()
		}
	}
	for i, s := range nodes {
		cluster := fmt.Sprintf("server_name: n%d\ncluster {\n name: dlocktest\n listen: 127.0.0.1:%d\n routes: [%s]\n}\n",
			i, cports[i], strings.Join(routes, ", "))
		s.args = func(port int, dir string) []string {
			return []string{"-c", writeNATSConf(t, dir, port, cluster, nil)}
		}
		// A node alone has no JetStream quorum: start all, then wait for each.
		s.ready = func(context.Context, string) error { return nil }
		t.Cleanup(s.Stop)
		if err := s.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start %s: %v", s.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	for _, s := range nodes {
		s.ready = natsReady
		for {
			err := natsReady(ctx, s.Addr())
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				stop()
				return nil, fmt.Errorf("%s not ready: %v: %s", s.Name, err, tail(s.Log()))
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nodes, nil
}

func writeNATSConf(t TB, dir string, port int, cluster string, conf []NATSConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:%d\njetstream {\n store_dir: %q\n}\n%s", port, filepath.Join(dir, "js"), cluster)
	for _, c := range conf {
		b.WriteString(string(c) + "\n")
	}
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatalf("nats-server config: %v", err)
	}
	return path
}

// natsReady asks the server's health endpoint through a client: JetStream
// must answer (a cluster node, once there is a meta leader).
func natsReady(ctx context.Context, addr string) error {
	nc, err := nats.Connect("nats://"+addr, nats.Timeout(time.Second), nats.NoReconnect(),
		nats.UserInfo("ready", "ready")) // ignored without auth; refused with it: still up
	if err != nil {
		if e := strings.ToLower(err.Error()); strings.Contains(e, "authorization") || strings.Contains(e, "tls") {
			return nil // up, and it refused a client without credentials
		}
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}

// NATSStreamLeader returns the node of a NATSCluster that leads the stream
// (a bucket's stream is "KV_<bucket>"), or nil if none can say.
func NATSStreamLeader(ctx context.Context, nodes []*Server, stream string) *Server {
	for _, s := range nodes {
		nc, err := nats.Connect("nats://"+s.Addr(), nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			continue
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := js.Stream(ictx, stream)
		cancel()
		nc.Close()
		if err != nil || st.CachedInfo().Cluster == nil {
			continue
		}
		for _, n := range nodes {
			if strings.HasSuffix(n.Name, " "+st.CachedInfo().Cluster.Leader) {
				return n
			}
		}
	}
	return nil
}
