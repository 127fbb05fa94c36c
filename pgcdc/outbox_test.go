package pgcdc

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/outbox"
)

// txnLog records the Kafka transactions a sink committed.
type txnLog struct {
	mu        sync.Mutex
	committed []kafkasink.TransactionInfo
}

func (l *txnLog) OnTransactionCommitted(i kafkasink.TransactionInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.committed = append(l.committed, i)
}

// holds reports whether one committed Kafka transaction holds every
// position from first to last.
func (l *txnLog) holds(first, last kafkasink.Position) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.committed, func(i kafkasink.TransactionInfo) bool {
		return i.First.Compare(first) <= 0 && i.Last.Compare(last) >= 0
	})
}

// recordPosition is the position of a record's event (its kafkasink.id).
func recordPosition(t *testing.T, r *kgo.Record) kafkasink.Position {
	t.Helper()
	p, err := kafkasink.ParsePosition(sinktest.Header(r, kafkasink.HeaderID))
	if err != nil {
		t.Fatalf("record on %s: %v", r.Topic, err)
	}
	return p
}

// TestOutboxDelivery runs Run with Config.Outbox on real PostgreSQL: a
// transaction's row changes and outbox messages reach their topics in
// commit order, in one Kafka transaction; a rolled-back transaction's
// message never appears; a message for a topic outside the allow-list,
// and a payload that breaks the format, are dead-lettered with their
// content; a message emitted non-transactionally is logged and not
// delivered.
func TestOutboxDelivery(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	events, secret, dlq := e.name+".events", e.name+".secret", e.name+".dlq"
	cfg := e.config(table)
	cfg.Outbox = &Outbox{Prefix: e.name + ".outbox", Topics: []string{e.name + ".ev*"}}
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	log := &txnLog{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: e.name, Topics: kafkasink.Topics{Prefix: "t", Partitions: 3},
		DeadLetterTopic: dlq, Hooks: []kafkasink.Hook{log}})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "Run streaming", r, e.streaming)

	em := outbox.Emitter{Prefix: cfg.Outbox.Prefix}
	emit := func(tx pgx.Tx, topic, key, value string) {
		if err := em.Emit(ctx, tx, outbox.Message{Topic: topic, Key: []byte(key), Value: []byte(value),
			Headers: []outbox.Header{{Name: "type", Value: []byte("test")}}}); err != nil {
			t.Fatal(err)
		}
	}
	e.txn(func(tx pgx.Tx) {
		tx.Exec(ctx, "INSERT INTO "+table+" VALUES (1, 1, 'a')")
		emit(tx, events, "1", "created")
		tx.Exec(ctx, "UPDATE "+table+" SET seq = 2 WHERE id = 1")
		emit(tx, events, "1", "updated")
	})
	func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		tx, err := e.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tx.Exec(ctx, "INSERT INTO "+table+" VALUES (2, 1, 'b')")
		emit(tx, events, "2", "rolled back")
		tx.Rollback(ctx)
	}()
	e.txn(func(tx pgx.Tx) {
		emit(tx, secret, "3", "not allowed")
		if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, $1, $2::text)", cfg.Outbox.Prefix, `{"v":9,"topic":"x"}`); err != nil {
			t.Fatal(err)
		}
		tx.Exec(ctx, "INSERT INTO "+table+" VALUES (3, 1, 'c')")
	})
	// A message emitted non-transactionally has no commit to go with: it
	// is logged, never delivered.
	nonTxn, err := outbox.Marshal(outbox.Message{Topic: events, Key: []byte("9"), Value: []byte("non-transactional")})
	if err != nil {
		t.Fatal(err)
	}
	e.exec("SELECT pg_logical_emit_message(false, $1, $2::bytea)", cfg.Outbox.Prefix, nonTxn)

	var rows, msgs, dead []*kgo.Record
	waitFor(t, 30*time.Second, "rows, messages and dead letters in Kafka", r, func() bool {
		rows = sinktest.ReadCommitted(t, e.brokers, "t.public."+table)
		msgs = sinktest.ReadCommitted(t, e.brokers, events)
		dead = sinktest.ReadCommitted(t, e.brokers, dlq)
		return len(rows) >= 3 && len(msgs) >= 2 && len(dead) >= 2 && len(logs.find("outbox message emitted non-transactionally")) == 1
	})
	if len(rows) != 3 || len(msgs) != 2 || len(dead) != 2 {
		t.Fatalf("%d row records, %d messages, %d dead letters; want 3, 2, 2", len(rows), len(msgs), len(dead))
	}
	for i, want := range []string{"created", "updated"} {
		m := msgs[i]
		if string(m.Value) != want || string(m.Key) != "1" || sinktest.Header(m, "type") != "test" {
			t.Errorf("message %d: key %q value %q headers %v; want key 1, value %q, type: test", i, m.Key, m.Value, m.Headers, want)
		}
	}
	// Commit order across the two topics: row, message, row, message.
	// (The rows are in three partitions: sort them by position.)
	slices.SortFunc(rows, func(a, b *kgo.Record) int { return recordPosition(t, a).Compare(recordPosition(t, b)) })
	r0, r1, m0, m1 := recordPosition(t, rows[0]), recordPosition(t, rows[1]), recordPosition(t, msgs[0]), recordPosition(t, msgs[1])
	if !(r0.Compare(m0) < 0 && m0.Compare(r1) < 0 && r1.Compare(m1) < 0 && r0.LSN == m1.LSN) {
		t.Errorf("positions: row %s, message %s, row %s, message %s; want them in this order in one commit", r0, m0, r1, m1)
	}
	if !log.holds(r0, m1) {
		t.Errorf("no one Kafka transaction holds %s to %s: the commit's rows and messages were not written together", r0, m1)
	}
	byTopic := map[string]*kgo.Record{}
	for _, d := range dead {
		byTopic[sinktest.Header(d, kafkasink.HeaderTopic)] = d
	}
	if d := byTopic[secret]; d == nil || string(d.Value) != "not allowed" || string(d.Key) != "3" ||
		!strings.Contains(sinktest.Header(d, kafkasink.HeaderError), "allow-list") {
		t.Errorf("dead letter for the topic outside the allow-list: %v", d)
	}
	if d := byTopic[""]; d == nil || string(d.Value) != `{"v":9,"topic":"x"}` || !strings.Contains(sinktest.Header(d, kafkasink.HeaderError), `"v" is 9`) {
		t.Errorf("dead letter for the bad payload: %v", d)
	}
	for _, rec := range append(msgs, dead...) {
		if strings.Contains(string(rec.Value), "rolled back") {
			t.Errorf("a rolled-back transaction's message reached %s", rec.Topic)
		}
	}
}
