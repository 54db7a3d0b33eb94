package memcachedlock

// ElectionUnsupported implements driver.ElectionRefuser: dlock refuses to
// make an Election on Memcached.
func (d *mcDriver) ElectionUnsupported() string {
	return "memcached may evict or lose the leader's key (a restart, memory pressure), which would elect a second leader, and keeps no term across restarts"
}
