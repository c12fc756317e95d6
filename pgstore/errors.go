package pgstore

import "errors"

// ErrBadName reports an Options.Schema or Options.Table (or the URL's
// leash_schema or leash_table) that is not a plain identifier: a letter or
// underscore, then letters, digits and underscores, within the length limit.
// The names are written into the DDL, function bodies included, and into the
// notification channel, so nothing else is accepted.
var ErrBadName = errors.New("pgstore: bad schema or table name")
