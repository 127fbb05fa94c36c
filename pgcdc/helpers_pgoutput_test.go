package pgcdc

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// wal is one XLogData: its WALStart and pgoutput payload.
type wal struct {
	lsn  kafkasink.LSN
	data []byte
}

// recorder collects what a Decoder delivers.
type recorder struct {
	events []kafkasink.Event
	txns   []Txn
	msgs   []Message
}

func newTestDecoder(t testing.TB, cfg DecoderConfig) (*Decoder, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg.OnEvent = func(ev kafkasink.Event) error { rec.events = append(rec.events, ev); return nil }
	cfg.OnCommit = func(tx Txn) error { rec.txns = append(rec.txns, tx); return nil }
	cfg.OnMessage = func(m Message) error { rec.msgs = append(rec.msgs, m); return nil }
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	d, err := NewDecoder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, rec
}

func feed(t *testing.T, d *Decoder, msgs ...wal) {
	t.Helper()
	for i, m := range msgs {
		if err := d.Decode(m.lsn, m.data); err != nil {
			t.Fatalf("message %d (%q at %s): %v", i, m.data[0], m.lsn, err)
		}
	}
}

var (
	t0     = time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	usersR = pgoutputmsg.Relation(0, 16384, "public", "users", 'd',
		pgoutputmsg.Key("id", pgtype.Int4OID), pgoutputmsg.Col("name", pgtype.TextOID), pgoutputmsg.Col("balance", pgtype.NumericOID))
)

func row(kv ...any) kafkasink.Row {
	var r kafkasink.Row
	for i := 0; i < len(kv); i += 2 {
		c := kafkasink.Column{Name: kv[i].(string), Value: kv[i+1]}
		if c.Value == unchanged {
			c.Value, c.Unchanged = nil, true
		}
		r = append(r, c)
	}
	return r
}

// unchanged marks an unchanged TOAST column in row.
var unchanged = &struct{ x int }{}
