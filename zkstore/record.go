package zkstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/leash-go/leash/driver"
)

var _ driver.ClientRecorder = (*Store)(nil)

// recordPrefix starts the data of a holder record's znode, followed by the
// record in JSON.
const recordPrefix = "leash record v1\n"

// recordJSON is a holder record as its znode keeps it; times are Unix
// milliseconds.
type recordJSON struct {
	TTL     int64        `json:"ttl_ms"`
	Host    string       `json:"host"`
	PID     int          `json:"pid"`
	Label   string       `json:"label,omitempty"`
	Command string       `json:"command,omitempty"`
	Started int64        `json:"started"`
	Locks   []lockRecord `json:"locks,omitempty"`
}

type lockRecord struct {
	Owner     string `json:"owner"`
	Acquired  int64  `json:"acquired"`
	TailSince int64  `json:"tail_since,omitempty"`
}

// recordPath is the znode of client id's holder record.
func (s *Store) recordPath(id string) string { return s.records + "/" + escapeSegment(id) }

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// PutClient implements [driver.ClientRecorder]: the record is the data of
// an ephemeral znode, Root/records/<id>, so it also ends with the Store's
// ZooKeeper session; it expires ttl after it was written, judged by the
// znode's modification time and the server's clock when it is read.
func (s *Store) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	if err := s.ensureRoot(ctx); err != nil {
		return err
	}
	j := recordJSON{TTL: max(ttl.Milliseconds(), 1), Host: rec.Host, PID: rec.PID, Label: rec.Label,
		Command: rec.Command, Started: millis(rec.Started)}
	for _, l := range rec.Locks {
		j.Locks = append(j.Locks, lockRecord{Owner: l.Owner, Acquired: millis(l.Acquired), TailSince: millis(l.TailSince)})
	}
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("zkstore: put client record %q: %w", rec.ID, err)
	}
	data := append([]byte(recordPrefix), b...)
	path := s.recordPath(rec.ID)
	for range maxAttempts {
		version, exists, err := s.recordVersion(ctx, path, rec.ID)
		switch {
		case err != nil:
			return err
		case exists:
			_, err = call(ctx, func() (*zk.Stat, error) { return s.conn.Set(path, data, version) })
		default:
			_, err = call(ctx, func() (string, error) { return s.conn.Create(path, data, zk.FlagEphemeral, s.acl) })
		}
		if changed(err) {
			continue // changed since it was read: read it again
		}
		return wrapErr("put the client record of", rec.ID, err)
	}
	return fmt.Errorf("zkstore: put client record %q: it changed under every one of %d attempts", rec.ID, maxAttempts)
}

// recordVersion reads the znode of client id's holder record at path: its
// version, and whether it exists. A znode there whose data is not a holder
// record (the application's) is refused with a *driver.NotALockError, so
// that PutClient and DeleteClient never change or delete it.
func (s *Store) recordVersion(ctx context.Context, path, id string) (int32, bool, error) {
	data, st, err := getData(ctx, s, path)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrapErr("read the client record of", id, err)
	}
	if !strings.HasPrefix(string(data), recordPrefix) {
		return 0, false, fmt.Errorf("zkstore: client record %q: %w", id,
			&driver.NotALockError{Name: id, Found: fmt.Sprintf("znode %s with %s, not a leash client record", path, describeData(data))})
	}
	return st.Version, true, nil
}

// DeleteClient implements [driver.ClientRecorder]. A znode at the record's
// path that is not a holder record is refused, untouched.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	path := s.recordPath(id)
	for range maxAttempts {
		version, exists, err := s.recordVersion(ctx, path, id)
		if err != nil || !exists {
			return err
		}
		err = call0(ctx, func() error { return s.conn.Delete(path, version) })
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if errors.Is(err, zk.ErrBadVersion) {
			continue // rewritten since it was read: read it again
		}
		return wrapErr("delete the client record of", id, err)
	}
	return fmt.Errorf("zkstore: delete client record %q: it changed under every one of %d attempts", id, maxAttempts)
}

// GetClient implements [driver.ClientRecorder]. A znode there whose data is
// not a record is reported as no record.
func (s *Store) GetClient(ctx context.Context, id string) (driver.ClientRecord, bool, error) {
	data, st, err := getData(ctx, s, s.recordPath(id))
	if errors.Is(err, zk.ErrNoNode) {
		return driver.ClientRecord{}, false, nil
	}
	if err != nil {
		return driver.ClientRecord{}, false, wrapErr("get the client record of", id, err)
	}
	body, ok := strings.CutPrefix(string(data), recordPrefix)
	var j recordJSON
	if !ok || json.Unmarshal([]byte(body), &j) != nil {
		return driver.ClientRecord{}, false, nil
	}
	now, err := s.now(ctx)
	if err != nil {
		return driver.ClientRecord{}, false, err
	}
	if now >= st.Mtime+j.TTL {
		return driver.ClientRecord{}, false, nil
	}
	rec := driver.ClientRecord{ID: id, Host: j.Host, PID: j.PID, Label: j.Label, Command: j.Command, Started: fromMillis(j.Started)}
	for _, l := range j.Locks {
		rec.Locks = append(rec.Locks, driver.LockRecord{Owner: l.Owner, Acquired: fromMillis(l.Acquired), TailSince: fromMillis(l.TailSince)})
	}
	slices.SortFunc(rec.Locks, func(a, b driver.LockRecord) int { return a.Acquired.Compare(b.Acquired) })
	return rec, true, nil
}
