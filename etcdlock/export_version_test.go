package etcdlock

// LeaksLeaseKeys exposes leaksLeaseKeys to the tenant tests.
var LeaksLeaseKeys = leaksLeaseKeys
