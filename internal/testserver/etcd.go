package testserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Etcd starts a private single-member etcd from the etcd binary (Debian's
// etcd-server package).
func Etcd(t TB) *Server {
	t.Helper()
	s := &Server{Name: "etcd", bin: LookBinary(t, "etcd")}
	s.args = func(port int, dir string) []string { return etcdArgs("http", port, dir) }
	s.ready = etcdReady
	s.start(t)
	return s
}

// etcdArgs are the arguments of a single member whose client URL is
// scheme://127.0.0.1:port, its peer URL on a free port, its data in dir,
// then extra.
func etcdArgs(scheme string, port int, dir string, extra ...string) []string {
	peer, _ := FreePort()
	curl := scheme + "://127.0.0.1:" + strconv.Itoa(port)
	purl := "http://127.0.0.1:" + strconv.Itoa(peer)
	return append([]string{"--name", "dlocktest", "--data-dir", dir + "/data",
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "dlocktest=" + purl, "--log-level", "error"}, extra...)
}

// etcdReady asks /health, which says true once the member has a leader.
func etcdReady(ctx context.Context, addr string) error {
	return etcdHealth(ctx, http.DefaultClient, "http://"+addr)
}

// etcdHealth asks base's /health through hc and wants it healthy.
func etcdHealth(ctx context.Context, hc *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"health":"true"`) {
		return fmt.Errorf("etcd health: %s", body)
	}
	return nil
}
