package redislock

// SetPauseHook makes f run in every waiter of this process before it
// refreshes its place in the queue (see pauseHook); nil removes it.
func SetPauseHook(f func(name string)) {
	if f == nil {
		pauseHook.Store(nil)
		return
	}
	pauseHook.Store(&f)
}
