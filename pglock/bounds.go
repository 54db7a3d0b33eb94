package pglock

// The session settings that bound a holding connection by its lease (see
// "A holder cut off" in the package doc).

import (
	"strconv"
	"time"

	"github.com/dlock/dlock/internal/keepalive"
	"github.com/dlock/dlock/internal/sqlbase"
	"github.com/jackc/pgx/v5"
)

// boundSettings are the session settings that bound a holding connection
// by its lease (see sqlbase), in the order they are set; newDriver keeps
// those the server has. The idle timeout that fits the mode is added: idle
// in transaction for row mode, idle (PostgreSQL 14 and later) for session
// mode.
var boundSettings = []string{"tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout", "client_connection_check_interval"}

// bounds returns the names and values of the settings that bound a holding
// connection of a lease of ttl.
func (d *pgDriver) bounds(ttl time.Duration) (names, values []string) {
	ka := sqlbase.KeepaliveFor(ttl)
	value := map[string]int64{
		"tcp_keepalives_idle":                 int64(ka.Idle / time.Second),
		"tcp_keepalives_interval":             int64(ka.Interval / time.Second),
		"tcp_keepalives_count":                int64(ka.Count),
		"tcp_user_timeout":                    ka.UserTimeout.Milliseconds(),
		"client_connection_check_interval":    min(max(keepalive.RenewInterval(ttl), 100*time.Millisecond), time.Second).Milliseconds(),
		"idle_in_transaction_session_timeout": sqlbase.IdleMillis(ttl),
		"idle_session_timeout":                sqlbase.IdleMillis(ttl),
	}
	for _, n := range d.settings {
		names, values = append(names, n), append(values, strconv.FormatInt(value[n], 10))
	}
	return names, values
}

// idleSetting is the idle timeout that fits mode.
func idleSetting(mode Mode) string {
	if mode == ModeRow {
		return "idle_in_transaction_session_timeout"
	}
	return "idle_session_timeout"
}

// setBounds, as a materialised CTE, applies the settings $2 = $3 (local to
// the transaction if $4) before the statement that uses it takes the lock.
const setBounds = "WITH bounds AS MATERIALIZED (SELECT count(set_config(n, v, $4)) FROM unnest($2::text[], $3::text[]) AS s(n, v)) "

// resetBounds puts the settings named by the text[] parameter p back as the
// session began with them.
func resetBounds(p string) string {
	return "(SELECT count(set_config(name, reset_val, false)) FROM pg_settings WHERE name = ANY(" + p + "::text[]))"
}

// boundedTx begins a transaction that sets idle_in_transaction_session_timeout
// to ms (digits) for the rest of it, where the server has the setting, in
// the BEGIN's own round trip (one simple query of two statements). A
// transaction of several round trips holds its row locks while its client
// is away: a client paused or cut off between two statements would hold
// them, and stall every other client of the lock, until the server noticed
// it gone (never, behind a proxy that keeps the connection up). With it the
// server ends such a session once it has been idle that long. Set by the
// BEGIN, the bound covers the session from its first idle moment in the
// transaction (set by the next statement, it left a client stopped right
// after the BEGIN idle in the transaction for good, holding no lock).
func boundedTx(ms string) pgx.TxOptions {
	return pgx.TxOptions{BeginQuery: "BEGIN; SELECT set_config(name, '" + ms +
		"', true) FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'"}
}

// setBoundsSQL applies the settings $1 = $2, local to the transaction if $3.
const setBoundsSQL = "SELECT count(set_config(n, v, $3)) FROM unnest($1::text[], $2::text[]) AS s(n, v)"
