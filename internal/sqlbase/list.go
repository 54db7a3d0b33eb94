package sqlbase

import (
	"context"
	"sort"

	"github.com/dlock/dlock/driver"
)

// Rows is what List reads of a result set: database/sql's *sql.Rows and
// pgx's Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Names reads the one text column of rows, closing them with close, and
// returns the values sorted.
func Names(rows Rows, close func()) ([]string, error) {
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			close()
			return nil, err
		}
		names = append(names, n)
	}
	close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// InspectAll inspects each of names in turn and returns what it found of those
// held: the heart of both backends' driver.Lister.
func InspectAll(ctx context.Context, names []string, inspect func(ctx context.Context, name string) (driver.Info, error)) ([]driver.Info, error) {
	out := make([]driver.Info, 0, len(names))
	for _, name := range names {
		info, err := inspect(ctx, name)
		if err != nil {
			return nil, err
		}
		if info.Held {
			out = append(out, info)
		}
	}
	return out, nil
}
