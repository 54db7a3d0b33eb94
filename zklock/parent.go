package zklock

import "github.com/go-zookeeper/zk"

// maxKnownParents bounds the lock paths a driver remembers as empty.
const maxKnownParents = 10000

// parentEmpty reports whether the node of the lock at path is known to
// hold no data, so that create may write it (with the same empty data) in
// the transaction that creates our node.
func (d *zkDriver) parentEmpty(path string) bool {
	d.parentsMu.Lock()
	defer d.parentsMu.Unlock()
	return d.emptyParents[path]
}

// learnParent records what a read of the lock's children said about the
// lock's node: whether it holds data. A node that does hold data (someone
// else's) is never written.
func (d *zkDriver) learnParent(path string, st *zk.Stat) {
	if st == nil {
		return
	}
	d.parentsMu.Lock()
	defer d.parentsMu.Unlock()
	switch {
	case st.DataLength != 0:
		delete(d.emptyParents, path)
	case d.emptyParents == nil || len(d.emptyParents) >= maxKnownParents:
		d.emptyParents = map[string]bool{path: true}
	default:
		d.emptyParents[path] = true
	}
}
