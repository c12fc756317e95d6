package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

var _ driver.ClientRecorder = (*Store)(nil)

// recordValue is the value of a record key, JSON-encoded; times are Unix
// milliseconds.
type recordValue struct {
	Leash     int          `json:"leash"` // formatVersion
	Kind      string       `json:"kind"`  // kindClient
	Host      string       `json:"host"`
	PID       int          `json:"pid"`
	Label     string       `json:"label,omitempty"`
	Command   string       `json:"command,omitempty"`
	StartedMS int64        `json:"started_ms"`
	Locks     []lockRecord `json:"locks,omitempty"`
}

type lockRecord struct {
	Owner       string `json:"owner"`
	AcquiredMS  int64  `json:"acquired_ms"`
	TailSinceMS int64  `json:"tail_since_ms,omitempty"`
}

// kindClient is recordValue.Kind.
const kindClient = "client"

// recordSession is the session key of client id's record lease, apart from
// its locks' leases.
func recordSession(id string) string { return "record " + id }

// PutClient implements driver.ClientRecorder: it puts the record, as JSON,
// under an etcd lease of the record's own that lasts at least ttl from the
// call (a lease of ceil(ttl)+1 s, kept alive only by the next put, which
// the server expires at its next check, every 500 ms), so the record
// expires ttl to about ttl+2.5 s after the last put. The Client's lock
// leases are not involved: a record's loss changes nothing about a lock.
func (s *Store) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	send := time.Now()
	v := recordValue{Leash: formatVersion, Kind: kindClient, Host: rec.Host, PID: rec.PID, Label: rec.Label,
		Command: rec.Command, StartedMS: rec.Started.UnixMilli()}
	for _, l := range rec.Locks {
		lr := lockRecord{Owner: l.Owner, AcquiredMS: l.Acquired.UnixMilli()}
		if !l.TailSince.IsZero() {
			lr.TailSinceMS = l.TailSince.UnixMilli()
		}
		v.Locks = append(v.Locks, lr)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("etcdstore: put client record %q: %w", rec.ID, err)
	}
	for range maxAttempts {
		l, err := s.session(ctx, recordSession(rec.ID), ttl, send)
		if err != nil {
			return fmt.Errorf("etcdstore: put client record %q: %w", rec.ID, err)
		}
		key := s.clientKey(rec.ID)
		cmp, err := s.recordCmp(ctx, key)
		if err != nil {
			return fmt.Errorf("etcdstore: put client record %q: %w", rec.ID, err)
		}
		resp, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(b), clientv3.WithLease(l.id))).Commit()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.forget(recordSession(rec.ID), l)
			continue
		}
		if err != nil {
			return fmt.Errorf("etcdstore: put client record %q: %w", rec.ID, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("etcdstore: put client record %q: its key or lease kept changing", rec.ID)
}

// recordCmp reads key and returns the comparison that it is still as read:
// absent, or a record. A key that holds anything else is an error: it is
// not the Store's to change.
func (s *Store) recordCmp(ctx context.Context, key string) (clientv3.Cmp, error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return clientv3.Cmp{}, err
	}
	kv := first(resp.Kvs)
	if kv == nil {
		return clientv3.Compare(clientv3.CreateRevision(key), "=", 0), nil
	}
	if _, ok := decodeRecord(kv.Value); !ok {
		return clientv3.Cmp{}, fmt.Errorf("key %q holds %d bytes that are not a leash client record; left as it is", key, len(kv.Value))
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision), nil
}

// decodeRecord parses a record key's value; false means it is not a record.
func decodeRecord(b []byte) (recordValue, bool) {
	v, ok := decodeJSON[recordValue](b)
	return v, ok && v.Leash == formatVersion && v.Kind == kindClient
}

// DeleteClient implements driver.ClientRecorder.
// It deletes the key only if it holds a record, unchanged since read.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	key := s.clientKey(id)
	for range maxAttempts {
		cmp, err := s.recordCmp(ctx, key)
		if err != nil {
			return fmt.Errorf("etcdstore: delete client record %q: %w", id, err)
		}
		resp, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return fmt.Errorf("etcdstore: delete client record %q: %w", id, err)
		}
		if resp.Succeeded {
			s.forgetAll(recordSession(id))
			return nil
		}
	}
	return fmt.Errorf("etcdstore: delete client record %q: its key kept changing", id)
}

// GetClient implements driver.ClientRecorder. A key that holds anything but
// a record is reported as no record.
func (s *Store) GetClient(ctx context.Context, id string) (driver.ClientRecord, bool, error) {
	resp, err := s.cli.Get(ctx, s.clientKey(id))
	if err != nil {
		return driver.ClientRecord{}, false, fmt.Errorf("etcdstore: get client record %q: %w", id, err)
	}
	kv := first(resp.Kvs)
	if kv == nil {
		return driver.ClientRecord{}, false, nil
	}
	v, ok := decodeRecord(kv.Value)
	if !ok {
		return driver.ClientRecord{}, false, nil
	}
	rec := driver.ClientRecord{ID: id, Host: v.Host, PID: v.PID, Label: v.Label, Command: v.Command, Started: time.UnixMilli(v.StartedMS)}
	for _, l := range v.Locks {
		lr := driver.LockRecord{Owner: l.Owner, Acquired: time.UnixMilli(l.AcquiredMS)}
		if l.TailSinceMS != 0 {
			lr.TailSince = time.UnixMilli(l.TailSinceMS)
		}
		rec.Locks = append(rec.Locks, lr)
	}
	return rec, true, nil
}
