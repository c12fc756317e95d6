package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leash-go/leash/driver"
)

// maxClientIDLen is the longest client id the records table holds.
const maxClientIDLen = 64

// PutClient implements driver.ClientRecorder: one CALL of
// <table>_put_client writes the record (JSON) in <table>_clients, to expire
// ttl later by the server's clock.
func (s *Store) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	if err := checkClientID(rec.ID); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("mysqlstore: put client record with ttl %v: want > 0", ttl)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("mysqlstore: put client record: %w", err)
	}
	st, err := s.ready(ctx)
	if err != nil {
		return err
	}
	if _, err := st.putClient.ExecContext(ctx, []byte(rec.ID), b, micros(ttl)); err != nil {
		return fmt.Errorf("mysqlstore: put client record %q: %w", rec.ID, err)
	}
	return nil
}

// DeleteClient implements driver.ClientRecorder.
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	if err := checkClientID(id); err != nil {
		return err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return err
	}
	if _, err := st.deleteClient.ExecContext(ctx, []byte(id)); err != nil {
		return fmt.Errorf("mysqlstore: delete client record %q: %w", id, err)
	}
	return nil
}

// GetClient implements driver.ClientRecorder; an expired record is none.
func (s *Store) GetClient(ctx context.Context, id string) (driver.ClientRecord, bool, error) {
	if err := checkClientID(id); err != nil {
		return driver.ClientRecord{}, false, err
	}
	st, err := s.ready(ctx)
	if err != nil {
		return driver.ClientRecord{}, false, err
	}
	var b []byte
	err = st.getClient.QueryRowContext(ctx, []byte(id)).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return driver.ClientRecord{}, false, nil
	}
	if err != nil {
		return driver.ClientRecord{}, false, fmt.Errorf("mysqlstore: get client record %q: %w", id, err)
	}
	var rec driver.ClientRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return driver.ClientRecord{}, false, fmt.Errorf("mysqlstore: client record %q is not leash's JSON: %w", id, err)
	}
	return rec, true, nil
}

func checkClientID(id string) error {
	if id == "" || len(id) > maxClientIDLen {
		return fmt.Errorf("mysqlstore: client id of %d bytes: want 1 to %d", len(id), maxClientIDLen)
	}
	return nil
}
