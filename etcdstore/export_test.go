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
