package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// sqlStore keeps the demo's stock in PostgreSQL or MySQL, in the table
// dlock_demo_stock; reads and writes are separate statements (the
// read-check-write race a lock must protect).
type sqlStore struct {
	db *sql.DB
	pg bool
}

func openSQLStore(ctx context.Context, u *url.URL) (stockStore, error) {
	var db *sql.DB
	var err error
	pg := u.Scheme != "mysql"
	if pg {
		v := *u
		v.Scheme = "postgres"
		db, err = sql.Open("pgx", v.String())
	} else {
		cfg := mysql.NewConfig()
		cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, strings.TrimPrefix(u.Path, "/")
		if u.User != nil {
			cfg.User = u.User.Username()
			cfg.Passwd, _ = u.User.Password()
		}
		db, err = sql.Open("mysql", cfg.FormatDSN())
	}
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	s := &sqlStore{db: db, pg: pg}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS dlock_demo_stock (k VARCHAR(255) PRIMARY KEY, v BIGINT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	return s, nil
}

// q rewrites ? placeholders as $1, $2… for PostgreSQL.
func (s *sqlStore) q(query string) string {
	if !s.pg {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *sqlStore) reset(ctx context.Context, key string, v int) error {
	upsert := "INSERT INTO dlock_demo_stock (k, v, fence) VALUES (?, ?, 0) ON DUPLICATE KEY UPDATE v = VALUES(v), fence = 0"
	if s.pg {
		upsert = "INSERT INTO dlock_demo_stock (k, v, fence) VALUES (?, ?, 0) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v, fence = 0"
	}
	_, err := s.db.ExecContext(ctx, s.q(upsert), key, v)
	return err
}

func (s *sqlStore) set(ctx context.Context, key string, v int) error {
	_, err := s.db.ExecContext(ctx, s.q("UPDATE dlock_demo_stock SET v = ? WHERE k = ?"), v, key)
	return err
}

func (s *sqlStore) get(ctx context.Context, key string) (int, int64, error) {
	var v int
	err := s.db.QueryRowContext(ctx, s.q("SELECT v FROM dlock_demo_stock WHERE k = ?"), key).Scan(&v)
	return v, int64(v), err // the level is its own version: it only goes down
}

func (s *sqlStore) cas(ctx context.Context, key string, version int64, v int) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q("UPDATE dlock_demo_stock SET v = ? WHERE k = ? AND v = ?"), v, key, version)
	return affected(res, err)
}

func (s *sqlStore) fencedSet(ctx context.Context, key string, v int, token uint64) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.q("UPDATE dlock_demo_stock SET v = ?, fence = ? WHERE k = ? AND fence <= ?"), v, int64(token), key, int64(token))
	return affected(res, err)
}

func affected(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *sqlStore) close() error { return s.db.Close() }
