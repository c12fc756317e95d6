package redisstore

// MarkerOnly makes s judge restarts by the marker alone, as earlier versions
// did (no server identity): the negative control of the snapshot tests.
func MarkerOnly(s *Store) *Store {
	s.markerOnly = true
	return s
}
