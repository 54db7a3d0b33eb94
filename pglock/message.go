package pglock

import (
	"context"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// stmt is a statement with its arguments ($1, $2, …), for oneMessage.
type stmt struct {
	sql  string
	args []any
}

// oneMessage runs stmts on c as one simple query: one message, which the
// server reads whole before it runs any of it, so that a client cut off
// while sending it has run none of it. It returns each statement's rows,
// as text. In a transaction open on c they run in it; otherwise they run
// as one transaction, committed after the last.
//
// An extended-protocol pipeline is one round trip too, but the server runs
// each statement as its Execute arrives and arms
// idle_in_transaction_session_timeout only after a Sync: a pipeline cut
// between a statement that locked a row and the Sync after it left the
// session active, waiting for the rest with the row locked, for as long as
// the connection looked alive (an adversary's cut found every other
// acquire of the lock still waiting 45 s later).
//
// A simple query carries no parameters, so the arguments go in as
// literals that need no quoting (literal).
func oneMessage(ctx context.Context, c *pgconn.PgConn, stmts ...stmt) ([][][][]byte, error) {
	var b strings.Builder
	for i, s := range stmts {
		if i > 0 {
			b.WriteString(";\n")
		}
		var err error
		b.WriteString(param.ReplaceAllStringFunc(s.sql, func(p string) string {
			n, _ := strconv.Atoi(p[1:])
			if n < 1 || n > len(s.args) {
				err = fmt.Errorf("pglock: %s in a statement of %d arguments", p, len(s.args))
				return p
			}
			lit, lerr := literal(s.args[n-1])
			if lerr != nil {
				err = lerr
			}
			return lit
		}))
		if err != nil {
			return nil, err
		}
	}
	res, err := c.Exec(ctx, b.String()).ReadAll()
	for _, r := range res {
		if r.Err != nil {
			return nil, r.Err
		}
	}
	if err != nil {
		return nil, err
	}
	if len(res) != len(stmts) {
		return nil, fmt.Errorf("pglock: %d results of %d statements", len(res), len(stmts))
	}
	out := make([][][][]byte, len(res))
	for i, r := range res {
		out[i] = r.Rows
	}
	return out, nil
}

// param matches a statement's parameters.
var param = regexp.MustCompile(`\$[0-9]+`)

// literal is v (a string, int16, int32 or int64) as an SQL literal of its
// type. A string goes as the hex of its UTF-8 bytes, decoded by the
// server, so that no character of it is ever read as SQL, whatever
// standard_conforming_strings says.
func literal(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return "convert_from(decode('" + hex.EncodeToString([]byte(v)) + "', 'hex'), 'UTF8')", nil
	case int16:
		return "(" + strconv.FormatInt(int64(v), 10) + ")::smallint", nil
	case int32:
		return "(" + strconv.FormatInt(int64(v), 10) + ")::integer", nil
	case int64:
		return "(" + strconv.FormatInt(v, 10) + ")::bigint", nil
	}
	return "", fmt.Errorf("pglock: an argument of type %T", v)
}

// textInt parses an integer column of a row oneMessage returned.
func textInt(b []byte) (int64, error) {
	return strconv.ParseInt(string(b), 10, 64)
}

// textInts parses the integer columns cols of a row oneMessage returned.
func textInts(row [][]byte, cols ...int) ([]int64, error) {
	n := make([]int64, len(cols))
	for i, c := range cols {
		var err error
		if n[i], err = textInt(row[c]); err != nil {
			return nil, err
		}
	}
	return n, nil
}
