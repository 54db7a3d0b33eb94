// Package embedetcd runs a real etcd server inside the process (etcd's own
// server/v3/embed) on free loopback ports and a temp dir. It is what dlock's
// demo and examples use when no backend URL is given, so dlock runs on a
// machine with nothing installed, and tests use it for multi-member clusters.
//
// It lives apart from etcdlock so that programs using the etcd backend as a
// client do not link the etcd server.
package embedetcd

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Member is one running etcd member.
type Member struct {
	Name      string
	ClientURL string // http://127.0.0.1:PORT
	Dir       string

	cfg     *embed.Config
	e       *embed.Etcd
	ownsDir bool
}

// Options configure Start and StartCluster.
type Options struct {
	// Dir is the parent of the data dirs; a temp dir (removed on Close) when
	// empty.
	Dir string
	// Timeout bounds the wait for the cluster to be ready. Default 60s.
	Timeout time.Duration
	// NoFsync skips fsync: much faster and losing data on a crash, for a
	// throwaway server such as the demo's.
	NoFsync bool
}

// Start runs a single-member etcd.
func Start(opts Options) (*Member, error) {
	ms, err := StartCluster(1, opts)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// StartCluster runs an n-member etcd cluster, every member in this process.
// Its ports are found free just before etcd listens on them, so another
// process may take one in between: without opts.Dir (the data in a fresh
// temp dir, removed on failure) it then starts again on new ports, up to
// five times.
func StartCluster(n int, opts Options) ([]*Member, error) {
	for try := 1; ; try++ {
		ms, err := startCluster(n, opts)
		if err == nil || opts.Dir != "" || try == 5 || !portTaken(err) {
			return ms, err
		}
	}
}

// portTaken reports whether err is a listen on a port already in use.
func portTaken(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

func startCluster(n int, opts Options) ([]*Member, error) {
	if n < 1 {
		return nil, errors.New("embedetcd: need at least one member")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	parent, owns := opts.Dir, false
	if parent == "" {
		d, err := os.MkdirTemp("", "dlock-etcd-")
		if err != nil {
			return nil, err
		}
		parent, owns = d, true
	}
	members := make([]*Member, n)
	var initial []string
	for i := range members {
		cport, err := freePort()
		if err != nil {
			return nil, err
		}
		pport, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &Member{Name: fmt.Sprintf("m%d", i), Dir: fmt.Sprintf("%s/m%d", parent, i), ownsDir: owns && i == 0}
		cfg := embed.NewConfig()
		cfg.Name = m.Name
		cfg.Dir = m.Dir
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.UnsafeNoFsync = opts.NoFsync
		curl := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(cport)}
		purl := url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(pport)}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{curl}, []url.URL{curl}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{purl}, []url.URL{purl}
		cfg.InitialClusterToken = "dlock-embedded"
		m.ClientURL = curl.String()
		m.cfg = cfg
		initial = append(initial, m.Name+"="+purl.String())
		members[i] = m
	}
	for _, m := range members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
	}
	errc := make(chan error, n)
	for _, m := range members { // members wait for each other: start them together
		go func() { errc <- m.start(opts.Timeout) }()
	}
	var errs []error
	for range members {
		errs = append(errs, <-errc)
	}
	if err := errors.Join(errs...); err != nil {
		for _, m := range members {
			m.Close()
		}
		if owns {
			_ = os.RemoveAll(parent)
		}
		return nil, err
	}
	if owns && n > 1 { // the first member removes the parent at Close
		members[0].Dir = parent + "/m0"
	}
	return members, nil
}

func (m *Member) start(timeout time.Duration) error {
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return fmt.Errorf("embedetcd: start %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		m.e = e
		return nil
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("embedetcd: %s: %w", m.Name, err)
	case <-time.After(timeout):
		e.Server.Stop()
		e.Close()
		return fmt.Errorf("embedetcd: %s not ready after %v", m.Name, timeout)
	}
}

// Stop stops the member, keeping its data so Restart can bring it back.
func (m *Member) Stop() {
	if m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

// Restart starts a stopped member again on its ports and data.
func (m *Member) Restart(timeout time.Duration) error {
	if m.e != nil {
		return nil
	}
	m.cfg.ClusterState = embed.ClusterStateFlagExisting
	errc := make(chan error, 1)
	go func() { errc <- m.start(timeout) }()
	return <-errc
}

// Close stops the member and removes its data if it made the dir.
func (m *Member) Close() {
	m.Stop()
	if m.ownsDir {
		_ = os.RemoveAll(strings.TrimSuffix(m.Dir, "/m0"))
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
