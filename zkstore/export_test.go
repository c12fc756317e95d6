package zkstore

// IgnoreWatchEvents makes Renew take a hold node's watch as proof that the
// node is there even after the watch fired: the negative control of the
// watches.
func (s *Store) IgnoreWatchEvents() { s.ignoreEvents = true }

// SlowChecks returns how many requests Renew has checked by reading their
// nodes, rather than settled by their watches.
func (s *Store) SlowChecks() int64 { return s.slow.Load() }
