package mysqlstore

import (
	"database/sql"

	"github.com/go-sql-driver/mysql"
)

// ParseURL exposes parseURL to the tests.
func ParseURL(raw string) (*mysql.Config, *Options, bool, error) { return parseURL(raw) }

// DB returns the Store's *sql.DB.
func (s *Store) DB() *sql.DB { return s.db }

// OnMigrateRead makes Migrate call f after it read the schema's state and
// before it applies any DDL.
func (s *Store) OnMigrateRead(f func()) { s.migrateRead = f }

// SplitStatements exposes splitStatements to the tests.
func SplitStatements(text string) []string { return splitStatements(text) }
