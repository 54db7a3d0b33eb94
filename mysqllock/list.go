package mysqllock

import (
	"context"
	"sort"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/sqlbase"
)

// List implements driver.Lister: table mode reads the live rows of
// dlock_locks, row and session modes the names in dlock_tokens (every name
// ever locked), and each name is inspected.
func (d *myDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	q := `SELECT name FROM dlock_tokens WHERE name LIKE ?`
	if d.mode == ModeTable {
		q = `SELECT name FROM dlock_locks WHERE name LIKE ? AND holds > 0 AND expires_at > NOW(6)`
	}
	rows, err := d.db.QueryContext(ctx, q, sqlbase.LikePrefix(prefix))
	if err != nil {
		return nil, myErr("list", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, myErr("list", err)
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, myErr("list", err)
	}
	sort.Strings(names)
	out := make([]driver.Info, 0, len(names))
	for _, name := range names {
		info, err := d.Inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
