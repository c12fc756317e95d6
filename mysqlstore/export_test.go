package mysqlstore

import "github.com/go-sql-driver/mysql"

// ParseURL exposes parseURL to the tests.
func ParseURL(raw string) (*mysql.Config, *Options, bool, error) { return parseURL(raw) }
