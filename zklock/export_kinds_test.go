package zklock

import (
	"github.com/dlock/dlock"
	"github.com/dlock/dlock/driver"
)

// Driver returns c's driver, for driver-level tests of the kinds.
func Driver(c *dlock.Client) driver.Driver { return driverOf(c) }
