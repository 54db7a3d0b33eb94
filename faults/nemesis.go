package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock/dlock/internal/testserver"
)

// Fault is one kind of injection.
type Fault struct {
	Name string
	// StoreFor is the store kind the fault runs on for b ("" if the
	// fault does not apply to b).
	StoreFor func(b *Backend) string
	// Inject injects the fault once and returns when it is over.
	Inject func(ctx context.Context, r *run) error
	// Settle, if set, runs after an injection has been judged for
	// progress and before the next one: it waits until the store is back
	// to what the next injection assumes (see KillLeader). Progress is
	// still timed from the end of Inject.
	Settle func(ctx context.Context, r *run) error
	// OnServers: the fault acts on the store's servers (kills or restarts
	// them), so the store is not probed for stalls (see probeStore): a
	// slow answer there is the fault's, and the bounds judge it.
	OnServers bool
}

func sameStore(b *Backend) string { return b.Store }

// notCluster keeps the 3-member clusters to the faults that need them (the
// single-member runs cover the rest), to bound the suite's time.
func notCluster(b *Backend) string {
	if b.Store == "etcd3" || b.Store == "zk3" || b.Store == "nats3" {
		return ""
	}
	return b.Store
}

func singleServer(b *Backend) string {
	switch b.Store {
	case "redis3", "etcd3", "zk3", "nats3":
		return ""
	}
	return b.Store
}

// Faults returns every fault, in the order the suite runs them.
func Faults() []*Fault {
	return []*Fault{
		PauseWaiter, BlackholeHolder, PauseHolder, KillHolder,
		RestartServer, RestartPersistent, KillConn, KillLeader,
		RedlockMinority, RedlockMajority, RedlockRestartEmpty,
	}
}

// PauseWaiter stops a worker waiting in Lock for TTL + 1 s (SIGSTOP), as a
// GC pause or a frozen VM would, then continues it.
var PauseWaiter = &Fault{Name: "pause-waiter", StoreFor: sameStore,
	Inject: func(ctx context.Context, r *run) error {
		p, err := r.waiter(ctx)
		if err != nil {
			return err
		}
		pauseFor(ctx, r, p, r.cfg.TTL+time.Second)
		return nil
	}}

// PauseHolder stops the holder, in a hold that lasts until loss, for TTL +
// 1 s.
var PauseHolder = &Fault{Name: "pause-holder", StoreFor: notCluster,
	Inject: func(ctx context.Context, r *run) error {
		p, err := r.longHolder(ctx)
		if err != nil {
			return err
		}
		pauseFor(ctx, r, p, r.cfg.TTL+time.Second)
		return nil
	}}

func pauseFor(ctx context.Context, r *run, p *proc, d time.Duration) {
	r.chk.Record(p.id, kindPause, "")
	p.pause()
	sleep(ctx, d)
	p.resume()
	r.chk.Record(p.id, kindResume, "")
}

// BlackholeHolder drops the holder's traffic to the store (connections stay
// open) for TTL + 2 s, then heals it.
var BlackholeHolder = &Fault{Name: "blackhole-holder", StoreFor: notCluster,
	Inject: func(ctx context.Context, r *run) error {
		p, err := r.longHolder(ctx)
		if err != nil {
			return err
		}
		r.mu.Lock()
		proxies := r.proxies[p.id]
		r.mu.Unlock()
		for _, x := range proxies {
			x.Cut()
		}
		r.chk.Record(p.id, kindCut, "")
		sleep(ctx, r.cfg.TTL+2*time.Second)
		for _, x := range proxies {
			x.Heal()
		}
		r.chk.Record(p.id, kindHeal, "")
		return nil
	}}

// KillHolder kills the holder (kill -9) and starts a new worker in its
// place.
var KillHolder = &Fault{Name: "kill-holder", StoreFor: notCluster,
	Inject: func(ctx context.Context, r *run) error {
		p, err := r.longHolder(ctx)
		if err != nil {
			return err
		}
		r.chk.Record(p.id, kindKill, "")
		p.kill()
		r.mu.Lock()
		delete(r.procs, p.id)
		proxies := r.proxies[p.id]
		delete(r.proxies, p.id)
		r.mu.Unlock()
		for _, x := range proxies {
			_ = x.Close()
		}
		sleep(ctx, r.cfg.TTL+time.Second)
		return r.spawn()
	}}

// RestartServer kills the server (kill -9) while the lock is held and
// restarts it on its data: without persistence where the store has a choice
// (Redis), so it comes back empty.
var RestartServer = &Fault{Name: "restart-server", StoreFor: singleServer, Inject: restartServer, OnServers: true}

// RestartPersistent is RestartServer on Redis with an fsync'd AOF.
var RestartPersistent = &Fault{Name: "restart-server-aof", OnServers: true,
	StoreFor: func(b *Backend) string {
		if b.Store == "redis" {
			return "redis-aof"
		}
		return ""
	},
	Inject: restartServer}

func restartServer(ctx context.Context, r *run) error {
	if _, err := r.longHolder(ctx); err != nil {
		return err
	}
	s := r.store.Servers[0]
	r.chk.Record(-1, kindSrvKill, s.Name)
	s.Kill()
	sleep(ctx, 500*time.Millisecond)
	if err := s.Start(); err != nil {
		return fmt.Errorf("faults: restart %s: %w", s.Name, err)
	}
	r.chk.Record(-1, kindSrvStart, s.Name)
	return nil
}

// KillConn has the SQL server kill the holder's connections
// (pg_terminate_backend, KILL).
var KillConn = &Fault{Name: "kill-connection",
	StoreFor: func(b *Backend) string {
		if b.SQLMode != "" {
			return b.Store
		}
		return ""
	},
	Inject: func(ctx context.Context, r *run) error {
		p, err := r.longHolder(ctx)
		if err != nil {
			return err
		}
		r.mu.Lock()
		var ports []int
		for _, x := range r.proxies[p.id] {
			ports = append(ports, x.UpstreamPorts()...)
		}
		r.mu.Unlock()
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := r.store.killConns(kctx, ports); err != nil {
			return err
		}
		r.chk.Record(p.id, kindConnKill, "")
		sleep(ctx, r.cfg.TTL+time.Second)
		return nil
	}}

// KillLeader kills the leader of a 3-member etcd cluster or ZooKeeper
// ensemble under contention, and restarts it after TTL + 1 s. Each
// injection is one failure: before the next, a restarted ZooKeeper member
// has synced with the new leader and serves again (Settle). ZooKeeper's
// srvr answers as soon as a member listens, so without that wait the next
// injection killed the new leader while the restarted member was still
// syncing, two failures in a 3-member ensemble, and ZooKeeper 3.8.0 then
// lost acknowledged writes (docs/reliability.md, the paragraph on
// zk×3 sem × kill-leader).
var KillLeader = &Fault{Name: "kill-leader", OnServers: true,
	Settle: func(ctx context.Context, r *run) error {
		if r.store.Kind != "zk3" {
			return nil // an etcd or NATS member is ready once it serves: Start waits for that
		}
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		for _, s := range r.store.Servers {
			if err := testserver.ZooKeeperServing(sctx, s); err != nil {
				return fmt.Errorf("faults: %s did not rejoin: %w", s.Name, err)
			}
		}
		return nil
	},
	StoreFor: func(b *Backend) string {
		switch b.Store {
		case "etcd3", "zk3", "nats3":
			return b.Store
		}
		return ""
	},
	Inject: func(ctx context.Context, r *run) error {
		var leader *testserver.Server
		if r.store.Kind == "nats3" { // the leader of the bucket's stream
			leader = testserver.NATSStreamLeader(ctx, r.store.Servers, "KV_dlockfaults")
		}
		for _, s := range r.store.Servers {
			if leader == nil && r.store.Kind != "nats3" && isLeader(r.store.Kind, s) {
				leader = s
			}
		}
		if leader == nil {
			return fmt.Errorf("faults: no leader among %d members", len(r.store.Servers))
		}
		r.chk.Record(-1, kindSrvKill, leader.Name)
		leader.Kill()
		sleep(ctx, r.cfg.TTL+time.Second)
		if err := leader.Start(); err != nil {
			return fmt.Errorf("faults: restart %s: %w", leader.Name, err)
		}
		r.chk.Record(-1, kindSrvStart, leader.Name)
		return nil
	}}

func isLeader(kind string, s *testserver.Server) bool {
	if kind == "etcd3" {
		return testserver.EtcdIsLeader(s)
	}
	return testserver.ZooKeeperMode(s) == "leader"
}

func redlockOnly(b *Backend) string {
	if b.Store == "redis3" {
		return b.Store
	}
	return ""
}

// RedlockMinority kills one of Redlock's 3 masters while the lock is held
// and restarts it (empty) after TTL + 1 s.
var RedlockMinority = &Fault{Name: "redlock-minority", StoreFor: redlockOnly, OnServers: true,
	Inject: func(ctx context.Context, r *run) error { return killNodes(ctx, r, 1, r.cfg.TTL+time.Second) }}

// RedlockMajority kills two of the 3 masters while the lock is held and
// restarts them (empty) after TTL + 1 s.
var RedlockMajority = &Fault{Name: "redlock-majority", StoreFor: redlockOnly, OnServers: true,
	Inject: func(ctx context.Context, r *run) error { return killNodes(ctx, r, 2, r.cfg.TTL+time.Second) }}

// RedlockRestartEmpty kills one master while the lock is held and restarts
// it at once, empty: the case Redlock's critics raise.
var RedlockRestartEmpty = &Fault{Name: "redlock-restart-empty", StoreFor: redlockOnly, OnServers: true,
	Inject: func(ctx context.Context, r *run) error { return killNodes(ctx, r, 1, 0) }}

func killNodes(ctx context.Context, r *run, n int, down time.Duration) error {
	if _, err := r.longHolder(ctx); err != nil {
		return err
	}
	nodes := r.store.Servers[:n]
	for _, s := range nodes {
		r.chk.Record(-1, kindSrvKill, s.Name)
		s.Kill()
	}
	sleep(ctx, down)
	for _, s := range nodes {
		if err := s.Start(); err != nil {
			return fmt.Errorf("faults: restart %s: %w", s.Name, err)
		}
		r.chk.Record(-1, kindSrvStart, s.Name)
	}
	return nil
}
