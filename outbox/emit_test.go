package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/kafkasink/kafkasink/outbox"
)

// testPG returns the PostgreSQL URL of the integration tests, skipping
// when KAFKASINK_TEST_PG is unset.
func testPG(t testing.TB) string {
	t.Helper()
	url := os.Getenv("KAFKASINK_TEST_PG")
	if url == "" {
		t.Skip("KAFKASINK_TEST_PG is not set: no PostgreSQL (wal_level=logical) to emit into; scripts/testenv.sh starts one")
	}
	return url
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// decodedMessages returns the transactional logical decoding messages
// with prefix that a temporary test_decoding slot, made before emit runs,
// sees committed: PostgreSQL's own decoder, not ours.
func decodedMessages(t *testing.T, url, prefix string, emit func()) []string {
	t.Helper()
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	slot := fmt.Sprintf("outbox_test_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'test_decoding', true)", slot); err != nil {
		t.Fatal(err)
	}
	emit()
	rows, err := conn.Query(ctx, "SELECT data FROM pg_logical_slot_get_changes($1, NULL, NULL)", slot)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	head := "message: transactional: 1 prefix: " + prefix + ", sz: "
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, head); ok {
			_, content, _ := strings.Cut(rest, " content:")
			got = append(got, content)
		}
	}
	return got
}

// TestEmitCommitAndRollback emits through a pgx.Tx and a *sql.Tx: the
// messages of committed transactions are decoded, once each, in commit
// order, and those of rolled-back ones never.
func TestEmitCommitAndRollback(t *testing.T) {
	t.Parallel()
	url := testPG(t)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	em := outbox.Emitter{Prefix: "outbox.test.commit"}
	msg := func(n int) outbox.Message {
		return outbox.Message{Topic: "orders.events", Key: []byte(fmt.Sprint(n)), Value: []byte(fmt.Sprintf(`{"n":%d}`, n))}
	}
	got := decodedMessages(t, url, em.Prefix, func() {
		for n := range 4 {
			commit := n%2 == 0
			if n < 2 {
				tx, err := conn.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := em.Emit(ctx, tx, msg(n)); err != nil {
					t.Fatal(err)
				}
				if commit {
					err = tx.Commit(ctx)
				} else {
					err = tx.Rollback(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				continue
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := em.Emit(ctx, tx, msg(n)); err != nil {
				t.Fatal(err)
			}
			if commit {
				err = tx.Commit()
			} else {
				err = tx.Rollback()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	})
	var want []string
	for _, n := range []int{0, 2} {
		p, _ := outbox.Marshal(msg(n))
		want = append(want, string(p))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("decoded messages:\n%s\nwant (committed only, in order):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestEmitRefusesNonTransactions: a *sql.DB, a *pgx.Conn outside BEGIN,
// a *pgxpool.Pool, a pgx.Tx already committed and a value of another type
// are refused, naming what to pass.
func TestEmitRefusesNonTransactions(t *testing.T) {
	t.Parallel()
	url := testPG(t)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ended, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ended.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	m := outbox.Message{Topic: "t", Value: []byte("v")}
	for _, tc := range []struct {
		tx   any
		want string
	}{{db, "*sql.Tx"}, {conn, "pgx.Tx"}, {pool, "not a transaction"}, {ended, "transaction has ended"}, {42, "pass a pgx.Tx or a *sql.Tx"}} {
		if err := outbox.Emit(ctx, tc.tx, m); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Emit(%T): %v, want an error naming %q", tc.tx, err, tc.want)
		}
	}
}

// TestEmitBadInputLeavesTxUsable: a refused message writes nothing, so
// the caller's transaction goes on and commits.
func TestEmitBadInputLeavesTxUsable(t *testing.T) {
	t.Parallel()
	url := testPG(t)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	em := outbox.Emitter{Prefix: "outbox.test.bad"}
	good := outbox.Message{Topic: "t", Key: []byte("k"), Value: []byte("v")}
	got := decodedMessages(t, url, em.Prefix, func() {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := em.Emit(ctx, tx, outbox.Message{Value: []byte("v")}); !errors.Is(err, outbox.ErrNoTopic) {
			t.Errorf("Emit without a topic: %v, want ErrNoTopic", err)
		}
		if err := em.Emit(ctx, tx, good); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if len(got) != 1 {
		t.Errorf("%d messages decoded, want the one good message: %q", len(got), got)
	}
}

// TestSQLOnlyEmit runs the SQL-only example of docs/outbox.md: what
// another language sends is a payload Unmarshal reads.
func TestSQLOnlyEmit(t *testing.T) {
	t.Parallel()
	url := testPG(t)
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	doc, err := os.ReadFile("../docs/outbox.md")
	if err != nil {
		t.Fatal(err)
	}
	const start, end = "```sql\n", "```"
	_, rest, ok := strings.Cut(string(doc), start)
	example, _, _ := strings.Cut(rest, end)
	if !ok || !strings.Contains(example, "pg_logical_emit_message") {
		t.Fatalf("docs/outbox.md has no sql block with pg_logical_emit_message")
	}
	got := decodedMessages(t, url, outbox.DefaultPrefix, func() {
		if _, err := conn.Exec(ctx, example); err != nil {
			t.Fatalf("the SQL example of docs/outbox.md: %v", err)
		}
	})
	if len(got) != 1 {
		t.Fatalf("%d messages from the SQL example, want 1", len(got))
	}
	m, err := outbox.Unmarshal([]byte(got[0]), 0)
	if err != nil || m.Topic != "orders.events" || string(m.Key) != "42" || len(m.Headers) != 1 {
		t.Errorf("the SQL example's payload %s: %+v, %v; want topic orders.events, key 42, one header", got[0], m, err)
	}
}
