package pgstore

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrIsolation reports that a store's function refused to run because its
// transaction is not READ COMMITTED: the pool's sessions have another
// default_transaction_isolation (set on the role, the database, the server
// or in the URL). The store needs READ COMMITTED; see "How each operation
// runs" in the package doc. Nothing was changed.
var ErrIsolation = errors.New("pgstore: the lock functions run only under READ COMMITTED isolation: set default_transaction_isolation = 'read committed' for the store's connections")

// ErrBadName reports an Options.Schema or Options.Table (or the URL's
// leash_schema or leash_table) that is not a plain identifier: a letter or
// underscore, then letters, digits and underscores, within the length limit.
// The names are written into the DDL, function bodies included, and into the
// notification channel, so nothing else is accepted.
var ErrBadName = errors.New("pgstore: bad schema or table name")

// isolationSQLState is the SQLSTATE the functions raise when the transaction
// is not READ COMMITTED (leash_locks_isolation in schema.sql).
const isolationSQLState = "LK001"

// explain turns the functions' isolation refusal into ErrIsolation (with the
// server's message); other errors are returned as they are.
func explain(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == isolationSQLState {
		return fmt.Errorf("%w (the server says: %s)", ErrIsolation, pe.Message)
	}
	return err
}
