package faults

import (
	"context"

	"github.com/dlock/dlock/internal/testserver"
)

// Scenario is one fault on one backend, over a store kind.
type Scenario struct {
	Backend *Backend
	Fault   *Fault
	Store   string
}

// Plan lists the scenarios of backends × faults that apply, grouped by the
// store kind they run on (in order of first appearance), so each group
// starts its servers once.
func Plan(backends []*Backend, faults []*Fault) [][]Scenario {
	var order []string
	groups := map[string][]Scenario{}
	for _, b := range backends {
		for _, f := range faults {
			kind := f.StoreFor(b)
			if kind == "" {
				continue
			}
			if _, ok := groups[kind]; !ok {
				order = append(order, kind)
			}
			groups[kind] = append(groups[kind], Scenario{b, f, kind})
		}
	}
	var out [][]Scenario
	for _, k := range order {
		out = append(out, groups[k])
	}
	return out
}

// RunGroup starts the group's store through t (stopped at t's cleanup) and
// runs each scenario in turn; each result is also given to done, if set.
func RunGroup(ctx context.Context, t testserver.TB, cfg Config, group []Scenario, done func(Result)) []Result {
	t.Helper()
	if len(group) == 0 {
		return nil
	}
	cfg.logf("starting %s", group[0].Store)
	st := startStore(t, group[0].Store)
	var res []Result
	for _, sc := range group {
		if ctx.Err() != nil {
			break
		}
		r := Run(ctx, cfg, sc.Backend, sc.Fault, st)
		res = append(res, r)
		if done != nil {
			done(r)
		}
	}
	return res
}
