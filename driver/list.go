package driver

import "context"

// Lister is implemented by drivers that can enumerate the locks in their
// store, for operators (dlock ls, dlock top).
type Lister interface {
	// List describes every lock held now whose name starts with prefix
	// ("" for all), in name order. A driver whose store cannot list in its
	// current configuration returns an error wrapping ErrUnsupported that
	// says why.
	List(ctx context.Context, prefix string) ([]Info, error)
}
