package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The version check of the integration tests, which run against every
// supported PostgreSQL (docs/postgresql-versions.md). A test that needs a
// feature some supported version lacks says so with requirePG, which
// skips it there, naming the feature and the version that brought it; no
// test compares versions itself.

// pgFeature is a PostgreSQL feature that some supported versions lack.
type pgFeature struct {
	name  string // as a skip message names it
	since int    // the first major version that has it
	// probe uses the feature: %[1]s is a name that a schema, a table in
	// it (id int PRIMARY KEY) and the publication created share. It runs
	// in a transaction that is rolled back, and is a syntax error on a
	// server without the feature.
	probe string
}

var (
	pgColumnLists   = pgFeature{"publication column lists (FOR TABLE t (a, b))", 15, "CREATE PUBLICATION %[1]s FOR TABLE %[1]s.%[1]s (id)"}
	pgRowFilters    = pgFeature{"publication row filters (FOR TABLE t WHERE ...)", 15, "CREATE PUBLICATION %[1]s FOR TABLE %[1]s.%[1]s WHERE (id > 0)"}
	pgSchemaPublish = pgFeature{"publications of whole schemas (FOR TABLES IN SCHEMA)", 15, "CREATE PUBLICATION %[1]s FOR TABLES IN SCHEMA %[1]s"}

	pgGeneratedColumns = pgFeature{"published generated columns (publish_generated_columns, or in a column list)", 18, "CREATE PUBLICATION %[1]s FOR TABLE %[1]s.%[1]s WITH (publish_generated_columns = stored)"}

	pgFeatures = []pgFeature{pgColumnLists, pgRowFilters, pgSchemaPublish, pgGeneratedColumns}
)

// TestPGFeaturesMatchTheServer checks the feature table requirePG reads
// against the server: each feature works from its version on and is a
// syntax error before it.
func TestPGFeaturesMatchTheServer(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	major := pgMajor(t)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range pgFeatures {
		probe := fmt.Sprintf(f.probe, e.name)
		err := pgx.BeginFunc(context.Background(), e.db, func(tx pgx.Tx) error {
			ctx := context.Background()
			for _, sql := range []string{"CREATE SCHEMA " + e.name, fmt.Sprintf("CREATE TABLE %[1]s.%[1]s (id int PRIMARY KEY)", e.name)} {
				if _, err := tx.Exec(ctx, sql); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			if _, err := tx.Exec(ctx, probe); err != nil {
				return err
			}
			return errRollback
		})
		worked := errors.Is(err, errRollback)
		var pgErr *pgconn.PgError
		switch {
		case major >= f.since && !worked:
			t.Errorf("PostgreSQL %d, which should have %s: %s: %v", major, f.name, probe, err)
		case major < f.since && worked:
			t.Errorf("PostgreSQL %d, which should lack %s (it came in %d): %s worked, want a syntax error", major, f.name, f.since, probe)
		case major < f.since && !(errors.As(err, &pgErr) && pgErr.Code == "42601"):
			t.Errorf("PostgreSQL %d, which should lack %s (it came in %d): %s: %v, want a syntax error", major, f.name, f.since, probe, err)
		}
	}
}

// errRollback ends a transaction of TestPGFeaturesMatchTheServer whose
// probe worked, rolling it back.
var errRollback = errors.New("test: roll back")

// requirePG skips t when the test environment's PostgreSQL lacks one of
// features, naming it and the version that has it. Without a PostgreSQL
// it skips as every integration test does.
func requirePG(t testing.TB, features ...pgFeature) {
	t.Helper()
	major := pgMajor(t)
	for _, f := range features {
		if major < f.since {
			t.Skipf("PostgreSQL %d lacks %s: PostgreSQL %d has them", major, f.name, f.since)
		}
	}
}

var pgMajors struct {
	sync.Mutex
	byConn map[string]int
}

// pgMajor returns the major version of the test environment's PostgreSQL,
// asked once per connection string.
func pgMajor(t testing.TB) int {
	t.Helper()
	conn := sinktest.RealPG(t)
	pgMajors.Lock()
	defer pgMajors.Unlock()
	if v, ok := pgMajors.byConn[conn]; ok {
		return v
	}
	v, err := queryPGMajor(conn)
	if err != nil {
		t.Fatalf("reading the version of %s's server: %v", sinktest.EnvPG, err)
	}
	if pgMajors.byConn == nil {
		pgMajors.byConn = make(map[string]int)
	}
	pgMajors.byConn[conn] = v
	return v
}

func queryPGMajor(conn string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, conn)
	if err != nil {
		return 0, err
	}
	defer db.Close(ctx)
	var num int
	if err := db.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&num); err != nil {
		return 0, err
	}
	if num < 100000 {
		return 0, fmt.Errorf("server_version_num %d: PostgreSQL before 10, which no kafkasink supports", num)
	}
	return num / 10000, nil
}
