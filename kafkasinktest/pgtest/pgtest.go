// Package pgtest is the PostgreSQL side of the kafkasinktest kit, for
// tests that run pgcdc against a real server: cleaning up a replication
// slot, skipping where the database lacks an extension, and the row of
// every type pgcdc supports (testdata/types.sql) with the golden JSON of
// its events (pgcdc/testdata/golden/types.json), which an Encoder or
// Decoder outside the root module checks itself against (kafkasinkavro's
// do); and a primary with a streaming standby of its own (StartPair), for
// tests of decoding on a standby and of failovers. It reads the server's
// address from no variable of its own: the test passes a connection (see
// kafkasinktest.Env); StartPair finds the test environment's binaries
// through KAFKASINK_TEST_PG_CTL and KAFKASINK_TEST_DIR.
package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DropSlot drops the replication slot, ending a walsender still holding
// it, and tries again for up to 20 seconds (within ctx): the walsender of
// a stopped program may not have let it go yet. It is for cleanups on the
// shared server; it reports nothing.
func DropSlot(ctx context.Context, db *pgx.Conn, slot string) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, err := db.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, slot)
		if err == nil {
			_, err = db.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot)
		}
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// SkipWithoutExtension skips t when the database has no extension named
// name. An extension belongs to the whole database, and concurrent CREATE
// EXTENSIONs of one extension fail, so tests do not create one:
// scripts/testenv.sh does, once, as superuser.
func SkipWithoutExtension(t testing.TB, db *pgx.Conn, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var found bool
	if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)`, name).Scan(&found); err != nil {
		t.Fatalf("looking up extension %s: %v", name, err)
	}
	if !found {
		t.Skipf("the test database has no extension %s, which this test's workload uses: "+
			"scripts/testenv.sh up creates it (CREATE EXTENSION IF NOT EXISTS %s, as superuser, in the test database)", name, name)
	}
}
