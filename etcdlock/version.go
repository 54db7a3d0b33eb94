package etcdlock

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// checkVersion warns, on log, when the server is an etcd whose lease API
// shows any authenticated user the keys attached to every lease
// (CVE-2023-32082: LeaseTimeToLive with keys, and lease list, checked no
// permission before etcd 3.4.26 and 3.5.9). There, one tenant reads the
// lock names of every other (dlock's keys carry the names). A server that
// does not say its version (Status refused) is not checked.
func checkVersion(ctx context.Context, cli *clientv3.Client, log *slog.Logger) {
	eps := cli.Endpoints()
	if len(eps) == 0 {
		return
	}
	// Every endpoint at once, the first answer taken: asking the first
	// listed alone held every Open (every dlock command) for its whole
	// ctx when that member was stopped (an adversary pass: 5 s each).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		ep  string
		st  *clientv3.StatusResponse
		err error
	}
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		go func() {
			st, err := cli.Status(ctx, ep)
			answers <- answer{ep, st, err}
		}()
	}
	var a answer
	for range eps {
		if a = <-answers; a.err == nil {
			break
		}
	}
	if a.err != nil {
		log.Debug("etcdlock: cannot read the server's version", "err", a.err)
		return
	}
	if leaksLeaseKeys(a.st.Version) {
		log.Warn("etcdlock: this etcd server lets any user read the keys attached to any lease (CVE-2023-32082, "+
			"fixed in 3.4.26 and 3.5.9): a tenant sharing it can read every other tenant's lock names; "+
			"upgrade it, or give each trust domain a cluster of its own (see the etcdlock package doc)",
			"version", a.st.Version, "endpoint", a.ep)
	}
}

// leaksLeaseKeys reports whether etcd version v (e.g. "3.4.23") is older
// than the fix of CVE-2023-32082: 3.4.26 in 3.4, 3.5.9 in 3.5; every
// release before 3.4 too. A version it cannot read is taken as fixed.
func leaksLeaseKeys(v string) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 3 {
		return false
	}
	var n [3]int
	for i, p := range parts {
		p, _, _ = strings.Cut(p, "-") // 3.5.0-rc.1
		x, err := strconv.Atoi(p)
		if err != nil {
			return false
		}
		n[i] = x
	}
	switch {
	case n[0] != 3:
		return n[0] < 3
	case n[1] < 4:
		return true
	case n[1] == 4:
		return n[2] < 26
	case n[1] == 5:
		return n[2] < 9
	}
	return false
}
