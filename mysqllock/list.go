package mysqllock

import (
	"context"

	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
	"github.com/dlock/dlock/internal/sqlbase"
)

// List implements driver.Lister: table mode reads the live rows of
// dlock_locks, row and session modes the names in dlock_tokens (every name
// ever locked); in table mode the read-write locks and semaphores are the
// names with rows in dlock_holds; and each is inspected.
func (d *myDriver) List(ctx context.Context, prefix string) ([]driver.Info, error) {
	q := `SELECT name FROM dlock_tokens WHERE name LIKE ?`
	if d.mode == ModeTable {
		q = `SELECT name FROM dlock_locks WHERE name LIKE ? AND holds > 0 AND expires_at > UTC_TIMESTAMP(6)`
	}
	refs, err := d.listRefs(ctx, q, prefix, false)
	if err != nil {
		return nil, myErr("list", err)
	}
	if d.Caps().Supports(driver.Shared) || d.Caps().Supports(driver.Permit) {
		kinds, err := d.listRefs(ctx, sqlbase.KindsQuery("?"), prefix, true)
		if err != nil {
			return nil, myErr("list", err)
		}
		refs = append(refs, kinds...)
	}
	out, err := listing.Inspect(ctx, refs, listing.For(d))
	if err != nil {
		return nil, myErr("list", err)
	}
	why := "dlock does not count the sessions waiting for a MySQL GET_LOCK or row lock"
	if d.mode == ModeTable {
		why = "table-mode waiters poll the table and leave no record in it"
	}
	for i := range out {
		if out[i].Kind == driver.Exclusive {
			out[i].Notes = append(out[i].Notes, driver.WaitersUncounted(why+" (dlockotel's dlock.lock.waiting counts each process's own)"))
		}
	}
	return out, nil
}

// listRefs runs a List query (Refs).
func (d *myDriver) listRefs(ctx context.Context, q, prefix string, withFamily bool) ([]listing.Ref, error) {
	rows, err := d.db.QueryContext(ctx, q, sqlbase.LikePrefix(prefix))
	if err != nil {
		return nil, err
	}
	return sqlbase.Refs(rows, func() { rows.Close() }, withFamily)
}
