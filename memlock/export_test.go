package memlock

// Cut makes every later call of d fail, as if the client's connections were
// cut: nothing is released, so its leases expire in the store at their TTL.
func (d *Driver) Cut() { d.cut.Store(true) }
