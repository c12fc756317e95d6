package mysqlstore

import (
	"database/sql"

	"github.com/go-sql-driver/mysql"
)

// ParseURL exposes parseURL to the tests.
func ParseURL(raw string) (*mysql.Config, *Options, bool, error) { return parseURL(raw) }

// DB returns the Store's *sql.DB.
func (s *Store) DB() *sql.DB { return s.db }
