package pglock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// stmt is a statement with its arguments, for syncEach.
type stmt struct {
	sql  string
	args []any
}

// syncEach runs stmts on c in one round trip: one pipeline, in which each
// statement is followed by its own Sync, and returns each statement's rows
// as text. A transaction open on c goes on past each Sync, so the
// statements run in it as one after another would, while the client's
// turn between them costs nothing. (Begin it in a round trip of its own,
// with its bound: a BEGIN in the pipeline, cut off after its Sync, would
// leave the session in a transaction with no bound.)
//
// The Sync after each is what keeps a transaction's bound (boundTxSQL)
// covering the whole pipeline: PostgreSQL arms
// idle_in_transaction_session_timeout only after a Sync, before it reads
// the next message. A pipeline that reached the server in part (a network
// that cut it between two segments) would otherwise leave the session
// waiting for the rest, active rather than idle, with the rows it had
// locked, for as long as the connection looked alive.
func syncEach(ctx context.Context, c *pgconn.PgConn, stmts ...stmt) ([][][][]byte, error) {
	p := c.StartPipeline(ctx)
	for _, s := range stmts {
		vals, oids, err := textArgs(s.args)
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		p.SendQueryParams(s.sql, vals, oids, nil, nil)
		p.SendPipelineSync()
	}
	if err := p.Flush(); err != nil {
		_ = p.Close()
		return nil, err
	}
	out := make([][][][]byte, len(stmts))
	for i := range stmts {
		res, err := p.GetResults()
		if err != nil {
			_ = p.Close()
			return nil, err
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			_ = p.Close()
			return nil, fmt.Errorf("pglock: a pipeline's statement %d answered with %T", i+1, res)
		}
		r := rr.Read()
		if r.Err != nil {
			_ = p.Close()
			return nil, r.Err
		}
		out[i] = r.Rows
		if res, err = p.GetResults(); err != nil {
			_ = p.Close()
			return nil, err
		} else if _, ok := res.(*pgconn.PipelineSync); !ok {
			_ = p.Close()
			return nil, fmt.Errorf("pglock: a pipeline's Sync %d answered with %T", i+1, res)
		}
	}
	return out, p.Close()
}

// textArgs encodes args (string, int16, int32 or int64) as text with their
// types, so no quoting is involved.
func textArgs(args []any) ([][]byte, []uint32, error) {
	vals, oids := make([][]byte, len(args)), make([]uint32, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			vals[i], oids[i] = []byte(v), pgtype.TextOID
		case int16:
			vals[i], oids[i] = strconv.AppendInt(nil, int64(v), 10), pgtype.Int2OID
		case int32:
			vals[i], oids[i] = strconv.AppendInt(nil, int64(v), 10), pgtype.Int4OID
		case int64:
			vals[i], oids[i] = strconv.AppendInt(nil, v, 10), pgtype.Int8OID
		default:
			return nil, nil, fmt.Errorf("pglock: an argument of type %T", a)
		}
	}
	return vals, oids, nil
}

// textInt parses an integer column of a row syncEach returned.
func textInt(b []byte) (int64, error) {
	return strconv.ParseInt(string(b), 10, 64)
}
