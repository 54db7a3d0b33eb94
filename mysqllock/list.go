package mysqllock

import (
	"context"

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
	names, err := sqlbase.Names(rows, func() { rows.Close() })
	if err != nil {
		return nil, myErr("list", err)
	}
	return sqlbase.InspectAll(ctx, names, d.Inspect)
}
