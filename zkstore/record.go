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
		_, err := call(ctx, func() (*zk.Stat, error) { return s.conn.Set(path, data, -1) })
		if errors.Is(err, zk.ErrNoNode) {
			_, err = call(ctx, func() (string, error) { return s.conn.Create(path, data, zk.FlagEphemeral, s.acl) })
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
		}
		return wrapErr("put the client record of", rec.ID, err)
	}
	return fmt.Errorf("zkstore: put client record %q: it changed under every one of %d attempts", rec.ID, maxAttempts)
}

// DeleteClient implements [driver.ClientRecorder].
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	err := call0(ctx, func() error { return s.conn.Delete(s.recordPath(id), -1) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return wrapErr("delete the client record of", id, err)
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
