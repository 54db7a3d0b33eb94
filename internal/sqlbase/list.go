package sqlbase

import (
	"github.com/dlock/dlock/driver"
	"github.com/dlock/dlock/internal/listing"
)

// Rows is what List reads of a result set: database/sql's *sql.Rows and
// pgx's Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// KindsQuery selects the names and families (Family) of the read-write
// locks and semaphores with a hold row whose name is LIKE the one
// parameter, in the backend's placeholder (ph: "$1" or "?").
func KindsQuery(ph string) string {
	return `SELECT DISTINCT name, family FROM dlock_holds WHERE name LIKE ` + ph
}

// Refs reads rows, closing them with close, as the locks a backend's
// driver.Lister inspects: rows of one text column are Mutex names; rows
// of a name and a family (KindsQuery) are read-write locks or semaphores.
func Refs(rows Rows, close func(), withFamily bool) ([]listing.Ref, error) {
	defer close()
	var refs []listing.Ref
	for rows.Next() {
		r := listing.Ref{Family: driver.Exclusive}
		var err error
		if withFamily {
			var fam int
			err = rows.Scan(&r.Name, &fam)
			r.Family = driver.Shared
			if fam == int(driver.FamilySemaphore) {
				r.Family = driver.Permit
			}
		} else {
			err = rows.Scan(&r.Name)
		}
		if err != nil {
			return nil, err
		}
		refs = append(refs, r)
	}
	close()
	return refs, rows.Err()
}
