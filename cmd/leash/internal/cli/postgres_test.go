package cli

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/leash-go/leash"
	"github.com/leash-go/leash/driver"
	"github.com/leash-go/leash/internal/testserver"
	_ "github.com/leash-go/leash/pgstore" // registers postgres:// (cmd/leash/store_postgres.go does for the binary)
)

// sharedPG is the package's PostgreSQL for the tests that inject no faults.
var sharedPG testserver.SharedPostgres

// pgTables creates the lock tables on the shared PostgreSQL, once.
var (
	pgTables    sync.Once
	pgTablesErr error
)

// postgresStore returns the test store on the package's PostgreSQL, its
// tables created.
func postgresStore(t *testing.T) testStore {
	t.Helper()
	url := sharedPG.Postgres(t).URL() + "&leash_table=cli"
	pgTables.Do(func() {
		s, err := driver.Open(context.Background(), url)
		if err != nil {
			pgTablesErr = err
			return
		}
		defer s.Close()
		pgTablesErr = s.(interface{ Migrate(context.Context) error }).Migrate(context.Background())
	})
	if pgTablesErr != nil {
		t.Fatal(pgTablesErr)
	}
	return testStore{name: "postgres", url: url,
		client: func(t *testing.T, opts *leash.Options) *leash.Client { return openClient(t, url, opts) }}
}

// TestPostgresTablesMissing: a PostgreSQL store whose tables do not exist
// is refused before any lock statement, and the message says how to create
// them (the CLI does not create them).
func TestPostgresTablesMissing(t *testing.T) {
	url := sharedPG.Postgres(t).URL() + "&leash_table=never_created"
	for _, args := range [][]string{{"run", "job", "--", "true"}, {"ls"}, {"show", "job"}, {"unlock", "--force", "job"}} {
		status, _, stderr := run(t, append([]string{args[0], "--store", url}, args[1:]...)...)
		if status == 0 || !strings.Contains(stderr, `"public"."never_created" does not exist`) || !strings.Contains(stderr, "Migrate") {
			t.Errorf("leash %s on missing tables = %d, %q; want a failure saying how to create them", args[0], status, stderr)
		}
	}
}
