package redlock

import (
	"slices"
	"sync"
	"time"

	"github.com/leash-go/leash/driver"
)

// NewUnsafe is New without its checks on the members, with the quorum
// given: for the negative controls that show what New refuses.
func NewUnsafe(members []driver.Store, quorum int) *Store {
	return &Store{members: members, quorum: quorum, factor: DefaultDriftFactor, fixed: DefaultDriftFixed, raisers: raisers(members), hot: newHot(len(members)), after: afterFunc, since: time.Since}
}

// HoldWakes makes s's watches hold each coalesced wake-up until the test
// fires it: held returns the fire functions of the wake-ups held so far.
func HoldWakes(s *Store) (held func() []func()) {
	var (
		mu sync.Mutex
		fs []func()
	)
	s.after = func(_ time.Duration, f func()) {
		mu.Lock()
		fs = append(fs, f)
		mu.Unlock()
	}
	return func() []func() {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(fs)
	}
}

// Leader returns the member an acquire of a hot name asks first.
func Leader(s *Store, name string) int { return s.hot.pick(name, time.Now()) }

// KeepHot makes names refused on s stay hot, and members that failed be
// passed over, for d instead of a second.
func KeepHot(s *Store, d time.Duration) { s.hot.ttl = d }

// Marked returns how many owners' locks s keeps marked as being released
// (see releasing.go): none once every release and renewal round is over.
func Marked(s *Store) int {
	s.releasing.mu.Lock()
	defer s.releasing.mu.Unlock()
	return len(s.releasing.marks)
}

// LateAnswers makes s's acquires find that late more time has passed than
// has, as when the members answer that much later.
func LateAnswers(s *Store, late time.Duration) {
	s.since = func(t time.Time) time.Duration { return time.Since(t) + late }
}
