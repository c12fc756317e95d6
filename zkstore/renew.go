package zkstore

import (
	"context"
	"errors"
	"sync"

	"github.com/leash-go/leash/driver"
)

// renewConcurrency bounds the requests one Renew has in flight: they are
// pipelined on the Store's one connection.
const renewConcurrency = 64

// Renew implements [driver.Store] for a [driver.SessionStore]: it extends
// nothing (KeepAlive does, for every lock of a client at once) and checks
// each lock: Renewed while the owner's lock node exists under its client's
// current session, RenewTaken when another owner's node is there instead,
// RenewGone when there is none (or the name holds something that is not a
// lock). It reads each lock's directory once, the reads pipelined.
func (s *Store) Renew(ctx context.Context, reqs []driver.Request) []driver.RenewResult {
	res := make([]driver.RenewResult, len(reqs))
	epochs := sync.Map{} // client id → *epochResult, read once per Renew
	sem := make(chan struct{}, renewConcurrency)
	var wg sync.WaitGroup
	for i, r := range reqs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			res[i] = s.check(ctx, r, &epochs)
		})
	}
	wg.Wait()
	return res
}

// epochResult is a client's current session epoch (0: none), read once.
type epochResult struct {
	once  sync.Once
	epoch uint64
	err   error
}

// check is Renew of one lock.
func (s *Store) check(ctx context.Context, r driver.Request, epochs *sync.Map) driver.RenewResult {
	if r.Kind != driver.KindMutex {
		return driver.RenewResult{Err: driver.Unsupported(s, r.Kind.String()+" locks")}
	}
	d, err := s.readDir(ctx, r.Name)
	var nl *driver.NotALockError
	if errors.As(err, &nl) {
		return driver.RenewResult{Status: driver.RenewGone}
	}
	if err != nil {
		return driver.RenewResult{Err: err}
	}
	if own, ok := find(d.nodes, r.Owner); ok {
		client := driver.OwnerClient(r.Owner)
		v, _ := epochs.LoadOrStore(client, &epochResult{})
		e := v.(*epochResult)
		e.once.Do(func() {
			cs, err := s.session(ctx, client)
			if cs != nil {
				e.epoch = cs.epoch
			}
			e.err = err
		})
		if e.err != nil {
			return driver.RenewResult{Err: e.err}
		}
		if e.epoch == own.epoch {
			return driver.RenewResult{Status: driver.Renewed}
		}
	}
	for _, n := range d.nodes {
		if n.owner != r.Owner {
			return driver.RenewResult{Status: driver.RenewTaken}
		}
	}
	return driver.RenewResult{Status: driver.RenewGone}
}
