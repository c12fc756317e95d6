package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/leash-go/leash/driver"
)

// PutClient implements [driver.ClientRecorder]: the record is a JSON
// document in the Table+"_clients" table, expiring ttl later by the
// server's clock.
func (s *Store) PutClient(ctx context.Context, rec driver.ClientRecord, ttl time.Duration) error {
	doc, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("pgstore: put client %q: %w", rec.ID, err)
	}
	if err := s.ready(ctx); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql.putClient, rec.ID, doc, micros(ttl)); err != nil {
		return fmt.Errorf("pgstore: put client %q: %w", rec.ID, err)
	}
	return nil
}

// DeleteClient implements [driver.ClientRecorder].
func (s *Store) DeleteClient(ctx context.Context, id string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql.deleteClient, id); err != nil {
		return fmt.Errorf("pgstore: delete client %q: %w", id, err)
	}
	return nil
}

// GetClient implements [driver.ClientRecorder].
func (s *Store) GetClient(ctx context.Context, id string) (driver.ClientRecord, bool, error) {
	if err := s.ready(ctx); err != nil {
		return driver.ClientRecord{}, false, err
	}
	var doc []byte
	err := s.pool.QueryRow(ctx, s.sql.getClient, id).Scan(&doc)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.ClientRecord{}, false, nil
	}
	if err != nil {
		return driver.ClientRecord{}, false, fmt.Errorf("pgstore: get client %q: %w", id, err)
	}
	var rec driver.ClientRecord
	if err := json.Unmarshal(doc, &rec); err != nil {
		return driver.ClientRecord{}, false, fmt.Errorf("pgstore: get client %q: the record is not one leash wrote: %w", id, err)
	}
	return rec, true, nil
}
