package etcdstore

import "time"

// SessionKeys returns the session keys the Store keeps leases for.
func (s *Store) SessionKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.sessions {
		keys = append(keys, k)
	}
	return keys
}

// SweepNow runs session's sweep as if at now, whenever it last ran.
func (s *Store) SweepNow(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepAt = time.Time{}
	s.sweep(now)
}

// TrustPresence makes Renew take any key on a client's lease as its owner's,
// without the record of which owner of the client put it: the negative
// control of the claims.
func (s *Store) TrustPresence() { s.presenceOnly = true }

// SlowChecks returns how many requests Renew has checked by reading their
// keys, rather than settled from their leases' attached keys.
func (s *Store) SlowChecks() int64 { return s.slow.Load() }

// TTLFor is ttlFor: the etcd lease TTL, in seconds, of a lock of lease d.
func TTLFor(d time.Duration) int64 { return ttlFor(d) }
