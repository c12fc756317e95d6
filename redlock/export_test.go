package redlock

import "github.com/leash-go/leash/driver"

// NewUnsafe is New without its checks on the members, with the quorum
// given: for the negative controls that show what New refuses.
func NewUnsafe(members []driver.Store, quorum int) *Store {
	return &Store{members: members, quorum: quorum, factor: DefaultDriftFactor, fixed: DefaultDriftFixed, raisers: raisers(members)}
}
