package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leash-go/leash/driver"
	"github.com/redis/go-redis/v9"
)

var _ driver.ClientRecorder = (*Store)(nil)

// Fields of a holder record, the hash s.clientKey(id). Each lock of the record
// is a field lockField+owner whose value is the acquired time in Unix
// milliseconds, followed, once the lock was left to expire, by a space and
// the time it was.
const (
	fieldHost    = "host"
	fieldPID     = "pid"
	fieldLabel   = "label"
	fieldCommand = "command"
	fieldStarted = "started"
	lockField    = "lock:"
)

// clientKey is the key of the holder record of client id: a hash of its own,
// apart from every lock, so the lock hashes keep Redisson's layout.
// With Options.KeyPrefix it is prefixed like every other key of leash.
func (s *Store) clientKey(id string) string { return s.opts.KeyPrefix + prefixName(clientPrefix, id) }

// PutClient implements [driver.ClientRecorder]: it replaces the hash in one
// MULTI/EXEC transaction (DEL, HSET, PEXPIRE), so a reader never sees it
// half written, with no script.
func (s *Store) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	if s.err != nil {
		return s.err
	}
	key := s.clientKey(rec.ID)
	fields := []any{
		fieldHost, rec.Host,
		fieldPID, strconv.Itoa(rec.PID),
		fieldStarted, strconv.FormatInt(rec.Started.UnixMilli(), 10),
	}
	if rec.Label != "" {
		fields = append(fields, fieldLabel, rec.Label)
	}
	if rec.Command != "" {
		fields = append(fields, fieldCommand, rec.Command)
	}
	for _, l := range rec.Locks {
		v := strconv.FormatInt(l.Acquired.UnixMilli(), 10)
		if !l.TailSince.IsZero() {
			v += " " + strconv.FormatInt(l.TailSince.UnixMilli(), 10)
		}
		fields = append(fields, lockField+l.Owner, v)
	}
	pipe := s.rdb.TxPipeline()
	pipe.Del(ctx, key)
	pipe.HSet(ctx, key, fields...)
	pipe.PExpire(ctx, key, time.Duration(ms(ttl))*time.Millisecond)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redisstore: put client record %q: %w", rec.ID, err)
	}
	return nil
}

// DeleteClient implements [driver.ClientRecorder].
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	if s.err != nil {
		return s.err
	}
	if err := s.rdb.Del(ctx, s.clientKey(id)).Err(); err != nil {
		return fmt.Errorf("redisstore: delete client record %q: %w", id, err)
	}
	return nil
}

// GetClient implements [driver.ClientRecorder]. It reads the record with one
// HGETALL; a key of another type under the record's name is reported as no
// record, and fields it does not know are ignored.
func (s *Store) GetClient(ctx context.Context, id string) (driver.ClientRecord, bool, error) {
	if s.err != nil {
		return driver.ClientRecord{}, false, s.err
	}
	m, err := s.rdb.HGetAll(ctx, s.clientKey(id)).Result()
	switch {
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return driver.ClientRecord{}, false, nil
	case err != nil:
		return driver.ClientRecord{}, false, fmt.Errorf("redisstore: get client record %q: %w", id, err)
	case len(m) == 0 || m[fieldHost] == "" && m[fieldPID] == "":
		return driver.ClientRecord{}, false, nil
	}
	rec := driver.ClientRecord{ID: id, Host: m[fieldHost], Label: m[fieldLabel], Command: m[fieldCommand]}
	rec.PID, _ = strconv.Atoi(m[fieldPID])
	rec.Started = unixMilli(m[fieldStarted])
	for f, v := range m {
		owner, ok := strings.CutPrefix(f, lockField)
		if !ok {
			continue
		}
		acquired, since, _ := strings.Cut(v, " ")
		rec.Locks = append(rec.Locks, driver.LockRecord{Owner: owner, Acquired: unixMilli(acquired), TailSince: unixMilli(since)})
	}
	slices.SortFunc(rec.Locks, func(a, b driver.LockRecord) int { return a.Acquired.Compare(b.Acquired) })
	return rec, true, nil
}

// unixMilli parses Unix milliseconds; anything else is the zero time.
func unixMilli(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}
