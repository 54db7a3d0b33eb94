package faults

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/dlock/dlock/internal/testserver"
	"github.com/jackc/pgx/v5"

	_ "github.com/go-sql-driver/mysql" // killing a MariaDB connection
)

// Backend is one backend configuration under test.
type Backend struct {
	Name  string // e.g. "postgres/row"
	Store string // the kind of store it runs on: backends with the same Store share servers
	// URL builds the backend URL from the addresses workers dial (their
	// proxies), in the order of the store's Addrs.
	URL func(addrs []string, ttl time.Duration) string
	// TokensSafe: the README calls its fencing tokens safe.
	TokensSafe bool
	// SQLMode is "table", "row" or "session" for the SQL backends.
	SQLMode string
	// Lock is the kind of lock its workers contend for: "" a Mutex, "rw"
	// an RWMutex, "semaphore" a Semaphore of Permits (see KindBackends).
	Lock    string
	Permits int
}

// kindsOK names the backends that hold read-write locks and semaphores.
var kindsOK = map[string]bool{"redis": true, "etcd": true, "zk": true, "etcd×3": true, "zk×3": true,
	"postgres/table": true, "mysql/table": true}

// KindBackends returns, for each of bs that holds them, the same backend
// contended through an RWMutex (named "NAME rw") and through a Semaphore of
// 2 permits ("NAME sem"), so every fault also runs against both kinds.
func KindBackends(bs []*Backend) []*Backend {
	var out []*Backend
	for _, b := range bs {
		if !kindsOK[b.Name] || b.Lock != "" {
			continue
		}
		rw, sem := *b, *b
		rw.Name, rw.Lock = b.Name+" rw", "rw"
		sem.Name, sem.Lock, sem.Permits = b.Name+" sem", "semaphore", 2
		out = append(out, &rw, &sem)
	}
	return out
}

// ElectionBackends returns each of bs that holds elections as candidates
// of an election ("NAME elect"): a hold is a term, so a paused, cut-off or
// killed holder is a paused, cut-off or killed leader, and the fenced view
// checks that a deposed leader's writes are refused.
func ElectionBackends(bs []*Backend) []*Backend {
	var out []*Backend
	for _, b := range bs {
		if b.Store == "memcached" || b.Lock != "" {
			continue
		}
		e := *b
		e.Name, e.Lock = b.Name+" elect", "election"
		out = append(out, &e)
	}
	return out
}

// Store is a running set of servers behind a backend.
type Store struct {
	Kind    string
	Servers []*testserver.Server
	// Persistent: the store keeps its data across a kill -9.
	Persistent bool
	// killConns kills the server connections from these local ports (SQL).
	killConns func(ctx context.Context, ports []int) error
	// dsn is how the controller reaches a SQL store directly (probeStore).
	dsn string
}

// Addrs returns the servers' addresses.
func (s *Store) Addrs() []string {
	a := make([]string, len(s.Servers))
	for i, srv := range s.Servers {
		a[i] = srv.Addr()
	}
	return a
}

// Backends is every backend the suite knows, in the order it runs them.
func Backends() []*Backend {
	bs := []*Backend{
		{Name: "redis", Store: "redis", TokensSafe: true, URL: func(a []string, _ time.Duration) string { return "redis://" + a[0] }},
		{Name: "redlock", Store: "redis3", TokensSafe: true, URL: func(a []string, _ time.Duration) string { return "redlock://" + strings.Join(a, ",") }},
		{Name: "etcd", Store: "etcd", TokensSafe: true, URL: func(a []string, _ time.Duration) string { return "etcd://" + a[0] }},
		{Name: "zk", Store: "zk", TokensSafe: true, URL: zkURL},
	}
	for _, m := range []string{"table", "row", "session"} {
		bs = append(bs, &Backend{Name: "postgres/" + m, Store: "postgres", TokensSafe: true, SQLMode: m,
			URL: func(a []string, _ time.Duration) string {
				return "postgres://postgres@" + a[0] + "/postgres?sslmode=disable&mode=" + m
			}})
	}
	for _, m := range []string{"table", "row", "session"} {
		bs = append(bs, &Backend{Name: "mysql/" + m, Store: "mariadb", TokensSafe: true, SQLMode: m,
			URL: func(a []string, _ time.Duration) string { return "mysql://root@" + a[0] + "/dlock?mode=" + m }})
	}
	bs = append(bs, &Backend{Name: "nats", Store: "nats", TokensSafe: true, URL: func(a []string, _ time.Duration) string {
		return "nats://" + a[0] + "/dlockfaults"
	}})
	bs = append(bs, &Backend{Name: "memcached", Store: "memcached", URL: func(a []string, _ time.Duration) string { return "memcached://" + a[0] }})
	return bs
}

// ClusterBackends are the 3-member clusters, for the leader kill.
func ClusterBackends() []*Backend {
	return []*Backend{
		{Name: "etcd×3", Store: "etcd3", TokensSafe: true, URL: func(a []string, _ time.Duration) string { return "etcd://" + strings.Join(a, ",") }},
		{Name: "zk×3", Store: "zk3", TokensSafe: true, URL: zkURL},
		// discovered=false: workers reach the servers only through their proxies.
		{Name: "nats×3", Store: "nats3", TokensSafe: true, URL: func(a []string, _ time.Duration) string {
			return "nats://" + strings.Join(a, ",") + "/dlockfaults?replicas=3&discovered=false"
		}},
	}
}

func zkURL(a []string, ttl time.Duration) string {
	return "zk://" + strings.Join(a, ",") + "?session_timeout=" + ttl.String()
}

// startStore starts the servers of a store kind.
func startStore(t testserver.TB, kind string) *Store {
	t.Helper()
	switch kind {
	case "redis":
		return &Store{Kind: kind, Servers: []*testserver.Server{testserver.Redis(t)}}
	case "redis-aof":
		return &Store{Kind: kind, Persistent: true, Servers: []*testserver.Server{
			testserver.Redis(t, "--appendonly", "yes", "--appendfsync", "always")}}
	case "redis3":
		return &Store{Kind: kind, Servers: []*testserver.Server{testserver.Redis(t), testserver.Redis(t), testserver.Redis(t)}}
	case "etcd":
		return &Store{Kind: kind, Persistent: true, Servers: []*testserver.Server{testserver.Etcd(t)}}
	case "etcd3":
		return &Store{Kind: kind, Persistent: true, Servers: testserver.EtcdCluster(t, 3, 0)}
	case "zk":
		return &Store{Kind: kind, Persistent: true, Servers: []*testserver.Server{testserver.ZooKeeper(t)}}
	case "zk3":
		return &Store{Kind: kind, Persistent: true, Servers: testserver.ZooKeeperEnsemble(t, 3)}
	case "postgres":
		srv := testserver.Postgres(t)
		url := testserver.PostgresURL(srv)
		return &Store{Kind: kind, Persistent: true, Servers: []*testserver.Server{srv}, dsn: url,
			killConns: func(ctx context.Context, ports []int) error { return pgKill(ctx, url, ports) }}
	case "mariadb":
		srv := testserver.MariaDB(t)
		testserver.MariaDBURL(t, srv, "dlock")
		dsn := "root@tcp(" + srv.Addr() + ")/"
		return &Store{Kind: kind, Persistent: true, Servers: []*testserver.Server{srv}, dsn: dsn,
			killConns: func(ctx context.Context, ports []int) error { return mysqlKill(ctx, dsn, ports) }}
	case "memcached":
		return &Store{Kind: kind, Servers: []*testserver.Server{testserver.Memcached(t)}}
	case "nats":
		return &Store{Kind: kind, Persistent: true, Servers: []*testserver.Server{testserver.NATSProcess(t)}}
	case "nats3":
		return &Store{Kind: kind, Persistent: true, Servers: testserver.NATSCluster(t, 3)}
	}
	t.Fatalf("faults: unknown store %q", kind)
	return nil
}

// pgKill terminates the backends whose client ports are ports.
func pgKill(ctx context.Context, url string, ports []int) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("faults: kill connections: %w", err)
	}
	defer conn.Close(ctx)
	p := make([]int32, len(ports))
	for i, v := range ports {
		p[i] = int32(v)
	}
	_, err = conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE client_port = ANY($1)", p)
	return err
}

// mysqlKill kills the connections whose client ports are ports.
func mysqlKill(ctx context.Context, dsn string, ports []int) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	want := map[string]bool{}
	for _, p := range ports {
		want[fmt.Sprintf("127.0.0.1:%d", p)] = true
	}
	rows, err := db.QueryContext(ctx, "SELECT ID, HOST FROM information_schema.PROCESSLIST")
	if err != nil {
		return fmt.Errorf("faults: kill connections: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		var host string
		if err := rows.Scan(&id, &host); err != nil {
			rows.Close()
			return err
		}
		if want[host] {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil {
			return fmt.Errorf("faults: KILL %d: %w", id, err)
		}
	}
	return nil
}
