// Package listing is the part of driver.Lister every backend shares: given
// the names a store keeps under a prefix, each with the family it was found
// in (a Mutex, a read-write lock, a semaphore), it inspects each and keeps
// what is held, in order.
package listing

import (
	"cmp"
	"context"
	"slices"

	"github.com/dlock/dlock/driver"
)

// Ref is a lock found in a store: its name and family, Exclusive for a
// Mutex (or an election), Shared for a read-write lock, Permit for a
// semaphore.
type Ref struct {
	Name   string
	Family driver.Kind
}

// Inspector describes one found lock: Inspect for a Mutex, InspectKind for
// the others.
type Inspector struct {
	Inspect     func(ctx context.Context, name string) (driver.Info, error)
	InspectKind func(ctx context.Context, name string, kind driver.Kind) (driver.Info, error)
}

// For is the Inspector of a driver: its Inspect, and its InspectKind if it
// has one.
func For(d driver.Driver) Inspector {
	in := Inspector{Inspect: d.Inspect}
	if k, ok := d.(driver.KindInspector); ok {
		in.InspectKind = k.InspectKind
	}
	return in
}

// Inspect sorts refs (name, then Mutex, read-write lock, semaphore), drops
// duplicates, inspects each and returns those held. A Mutex hold whose
// owner is a portable election candidate's is marked as an election term.
// A read-write lock or semaphore found on a driver without InspectKind is
// skipped.
func Inspect(ctx context.Context, refs []Ref, in Inspector) ([]driver.Info, error) {
	refs = slices.Clone(refs)
	for i := range refs {
		if refs[i].Family.Family() == driver.FamilyRWMutex {
			refs[i].Family = driver.Shared
		}
	}
	slices.SortFunc(refs, func(a, b Ref) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Family.Family(), b.Family.Family()))
	})
	refs = slices.Compact(refs)
	out := make([]driver.Info, 0, len(refs))
	for _, r := range refs {
		var (
			info driver.Info
			err  error
		)
		switch {
		case r.Family == driver.Exclusive:
			info, err = in.Inspect(ctx, r.Name)
			if err == nil && driver.IsElectionOwner(info.Owner) {
				info.Election = true
			}
		case in.InspectKind == nil:
			continue
		default:
			info, err = in.InspectKind(ctx, r.Name, r.Family)
			if err == nil {
				info.Kind = kindOf(info, r.Family)
			}
		}
		if err != nil {
			return nil, err
		}
		if info.Held {
			info.Name = r.Name
			out = append(out, info)
		}
	}
	return out, nil
}

// kindOf is the kind a listed read-write lock or semaphore shows: Write
// while a writer holds, else Shared; Permit for a semaphore.
func kindOf(info driver.Info, fam driver.Kind) driver.Kind {
	if fam == driver.Permit {
		return driver.Permit
	}
	for _, h := range info.Holders {
		if h.Kind == driver.Write {
			return driver.Write
		}
	}
	return driver.Shared
}

// Sort puts infos in driver.Lister's order: by name, then Mutex,
// read-write lock, semaphore.
func Sort(infos []driver.Info) {
	slices.SortStableFunc(infos, func(a, b driver.Info) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind.Family(), b.Kind.Family()))
	})
}
