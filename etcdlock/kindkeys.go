package etcdlock

import (
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The keys of read-write lock and semaphore contenders are named
// "<prefix><lease>_<n>": n is a number that none of the session's
// contenders under that prefix uses (the last given back, else a new one).
// Several contenders of one client hold keys of one name at once, so the
// name cannot be the lease alone, as a mutex's is; a name new for every
// acquisition would leave a deleted key in etcd's index for each one until
// the next compaction, and every read of the queue visits those (see the
// package doc, "Compaction"). Reused names leave as many as the client ever
// had contenders at once.
//
// A name is given back only once its key is known gone: deleted (by its
// create revision, or a release), or gone with its session, and every put
// of it answered. A name whose put had no certain answer is never used
// again by the session: that put may still land, and the next contender
// with the name would take its key for its own earlier try. A pool with such
// a name stays until the client closes (a few bytes per name). And once the
// contender is done with such a name, a sweeper watches for that put
// landing (sweepLatePuts): any key of the name under the session is then
// nobody's, and would hold the lock, or a permit, for as long as the
// session lives.

// kindKeys is one session's numbers under one prefix.
type kindKeys struct {
	sess  *session
	free  []int // given back
	next  int   // never used yet from here on
	taken int
	burnt bool // some number is never given back: keep the pool while sess lives
}

type kindPoolKey struct {
	lease clientv3.LeaseID
	pfx   string
}

// takeKindKey names a new contender key under pfx for sess. The slotHold it
// returns gives the name back when done (once per keep, as for a mutex
// slot), unless burn was called.
func (d *etcdDriver) takeKindKey(sess *session, pfx string) (string, *slotHold) {
	pk := kindPoolKey{sess.id, pfx}
	d.mu.Lock()
	p := d.kindKeys[pk]
	if p == nil {
		p = &kindKeys{sess: sess}
		if d.kindKeys == nil {
			d.kindKeys = map[kindPoolKey]*kindKeys{}
		}
		d.kindKeys[pk] = p
	}
	var n int
	if k := len(p.free); k > 0 {
		n, p.free = p.free[k-1], p.free[:k-1]
	} else {
		n = p.next
		p.next++
	}
	p.taken++
	d.mu.Unlock()
	slot := &slotHold{refs: 1}
	slot.free = func() { d.giveKindKey(pk, p, n, slot.isBurnt()) }
	return kindKeyName(pk, n), slot
}

// kindKeyName is the name of number n of a pool.
func kindKeyName(pk kindPoolKey, n int) string {
	return fmt.Sprintf("%s%x_%x", pk.pfx, int64(pk.lease), n)
}

// giveKindKey gives number n of pool p back, or burns it. A pool with
// nothing taken is forgotten if nothing is burnt (it starts again at 0), or
// if its session is lost: no key can be put under that lease again, late
// puts included.
func (d *etcdDriver) giveKindKey(pk kindPoolKey, p *kindKeys, n int, burnt bool) {
	if burnt { // no contender of the client uses the name again: a key of it is nobody's
		d.sweepLatePuts(p.sess, "", kindKeyName(pk, n))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p.taken--
	if burnt || d.closed { // Close stops background deletes: the key may still be there
		p.burnt = true
	} else {
		p.free = append(p.free, n)
	}
	if p.taken == 0 && (!p.burnt || p.sess.ended.Load()) && d.kindKeys[pk] == p {
		delete(d.kindKeys, pk)
	}
}

// forgetKindKeys forgets the idle pools of the lost session s (those with
// names taken go once the last comes back); d.mu is held.
func (d *etcdDriver) forgetKindKeys(s *session) {
	for pk, p := range d.kindKeys {
		if p.sess == s && p.taken == 0 {
			delete(d.kindKeys, pk)
		}
	}
}
