package pgcdc

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestEventRouter streams a Debezium-style outbox table through Run with
// Config.EventRouter on real PostgreSQL: inserted rows reach
// outbox.event.<aggregatetype> keyed by aggregateid with their payload
// and id header (and a chosen column as a header), as Debezium's
// EventRouter with JsonConverter writes them; deletes are ignored; an
// update is ignored under the default invalid-operation behaviour;
// nothing reaches the outbox table's own topic; a row whose topic Kafka
// refuses is dead-lettered.
func TestEventRouter(t *testing.T) {
	t.Parallel()
	for _, expand := range []bool{false, true} {
		t.Run(map[bool]string{false: "string payload", true: "expanded payload"}[expand], func(t *testing.T) {
			t.Parallel()
			testEventRouter(t, expand)
		})
	}
}

func testEventRouter(t *testing.T, expand bool) {
	e := newPGEnv(t)
	table := e.name
	e.exec("CREATE TABLE " + table + " (id uuid PRIMARY KEY, aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb)")
	cfg := e.config("public." + table)
	props := map[string]string{"table.fields.additional.placement": "type:header:eventType",
		"route.topic.replacement": e.name + ".${routedByValue}"}
	if expand {
		props["table.expand.json.payload"] = "true"
	}
	cfg.EventRouter = &EventRouter{Tables: []string{"public." + table}, Properties: props}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dlq := e.name + ".dlq"
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: e.name, Topics: kafkasink.Topics{Prefix: "t"}, DeadLetterTopic: dlq})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close(context.Background())
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "Run streaming", r, e.streaming)

	const id1, id2, id3 = "4d47e190-0402-4048-bc2c-89dd54343cdc", "5e58f2a1-0402-4048-bc2c-89dd54343cdc", "6f69a3b2-0402-4048-bc2c-89dd54343cdc"
	e.txn(func(tx pgx.Tx) {
		for _, sql := range []string{
			"INSERT INTO " + table + ` VALUES ('` + id1 + `', 'Order', '1', 'OrderCreated', '{"id": 1, "lines": [2, 3]}')`,
			"DELETE FROM " + table + " WHERE id = '" + id1 + "'",
			"INSERT INTO " + table + ` VALUES ('` + id2 + `', 'Customer', '7', 'CustomerMoved', NULL)`,
			"INSERT INTO " + table + ` VALUES ('` + id3 + `', 'bad topic', '8', 'X', '{}')`,
			"UPDATE " + table + " SET type = 'changed' WHERE id = '" + id2 + "'",
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	})
	var orders, customers, dead []*kgo.Record
	waitFor(t, 30*time.Second, "the routed records", r, func() bool {
		orders = sinktest.ReadCommitted(t, e.brokers, e.name+".Order")
		customers = sinktest.ReadCommitted(t, e.brokers, e.name+".Customer")
		dead = sinktest.ReadCommitted(t, e.brokers, dlq)
		return len(orders) >= 1 && len(customers) >= 1 && len(dead) >= 1
	})
	wantValue := `"{\"id\": 1, \"lines\": [2, 3]}"`
	if expand {
		wantValue = `{"id":1,"lines":[2,3]}`
	}
	if len(orders) != 1 || string(orders[0].Key) != `"1"` || string(orders[0].Value) != wantValue ||
		sinktest.Header(orders[0], "id") != id1 || sinktest.Header(orders[0], "eventType") != "OrderCreated" {
		t.Errorf("Order records: %v; want one, key \"1\", value %s, id %s, eventType OrderCreated", describe(orders), wantValue, id1)
	}
	if len(customers) != 1 || string(customers[0].Key) != `"7"` || customers[0].Value != nil || sinktest.Header(customers[0], "id") != id2 {
		t.Errorf("Customer records: %v; want one tombstone keyed \"7\" (a NULL payload)", describe(customers))
	}
	if len(dead) != 1 || sinktest.Header(dead[0], kafkasink.HeaderTopic) != e.name+".bad topic" {
		t.Errorf("dead letters: %v; want the row routed to %q", describe(dead), e.name+".bad topic")
	}
	if own := sinktest.ReadCommitted(t, e.brokers, "t.public."+table); len(own) != 0 {
		t.Errorf("%d records on the outbox table's own topic, want none: %v", len(own), describe(own))
	}
}

func describe(rs []*kgo.Record) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.Topic + " key=" + string(r.Key) + " value=" + string(r.Value) + ";")
	}
	return b.String()
}

func TestEventRouterConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		er   EventRouter
		want string
	}{
		{EventRouter{}, "Config.EventRouter.Tables is empty"},
		{EventRouter{Tables: []string{"a.b.c"}}, "Config.EventRouter.Tables"},
		{EventRouter{Tables: []string{"t"}, Properties: map[string]string{"route.by.feld": "x"}}, `"route.by.feld" is not supported`},
		{EventRouter{Tables: []string{"t"}, Properties: map[string]string{"route.topic.regex": "("}}, "route.topic.regex"},
		{EventRouter{Tables: []string{"t"}, Properties: map[string]string{"table.expand.json.payload": "yes please"}}, "want true or false"},
		{EventRouter{Tables: []string{"t"}, Properties: map[string]string{"debezium.op.invalid.behavior": "ignore"}}, "want warn, error or fatal"},
		{EventRouter{Tables: []string{"t"}, Properties: map[string]string{"table.fields.additional.placement": "type:envelope:eventType"}}, `placement "envelope" is not supported`},
	} {
		cfg := validConfig()
		cfg.EventRouter = &tc.er
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.er, err, tc.want)
		}
	}
	cfg := validConfig()
	cfg.EventRouter, cfg.Snapshot = &EventRouter{Tables: []string{"public.outbox"}}, true
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Config.Snapshot") {
		t.Errorf("EventRouter with Snapshot: %v", err)
	}
}

// TestEventRouterDefaultTopic: route.topic.replacement's default is
// Debezium's outbox.event.${routedByValue}.
func TestEventRouterDefaultTopic(t *testing.T) {
	t.Parallel()
	r, problems := (&EventRouter{Tables: []string{"public.outbox"}}).prepare()
	if problems != nil {
		t.Fatal(problems)
	}
	rec := r.record(kafkasink.Row{{Name: "id", Value: "e1"}, {Name: "aggregatetype", Value: "Order"}, {Name: "aggregateid", Value: int64(5)}, {Name: "payload", Value: "p"}})
	if rec.Refused != nil || rec.Topic != "outbox.event.Order" || string(rec.Key) != "5" || string(rec.Value) != `"p"` || string(rec.Headers[0].Value) != "e1" {
		t.Errorf("record %+v", rec)
	}
	if rec := r.record(kafkasink.Row{{Name: "id", Value: "e1"}, {Name: "payload", Value: "p"}}); rec.Refused == nil || !strings.Contains(rec.Refused.Error(), `"aggregatetype"`) {
		t.Errorf("a row without aggregatetype: %+v", rec)
	}
}

// TestEventRouterValues: bytea payloads as base64 strings, empty payloads
// as tombstones under route.tombstone.on.empty.payload, and what each
// operation on an outbox row becomes.
func TestEventRouterValues(t *testing.T) {
	t.Parallel()
	r, problems := (&EventRouter{Tables: []string{"public.outbox"}, Properties: map[string]string{"route.tombstone.on.empty.payload": "true"}}).prepare()
	if problems != nil {
		t.Fatal(problems)
	}
	row := func(payload any) kafkasink.Row {
		return kafkasink.Row{{Name: "id", Value: int64(1)}, {Name: "aggregatetype", Value: "A"}, {Name: "aggregateid", Value: "k"}, {Name: "payload", Value: payload}}
	}
	for _, tc := range []struct {
		payload any
		want    []byte
	}{{[]byte{0xde, 0xad}, []byte(`"3q0="`)}, {" ", nil}, {"", nil}, {"x", []byte(`"x"`)}} {
		if rec := r.record(row(tc.payload)); !bytes.Equal(rec.Value, tc.want) || (tc.want == nil) != (rec.Value == nil) {
			t.Errorf("payload %q: value %q, want %q", tc.payload, rec.Value, tc.want)
		}
	}
	for _, tc := range []struct {
		op       kafkasink.Op
		behavior string
		want     routerAction
	}{
		{kafkasink.OpInsert, "warn", routerRecord},
		{kafkasink.OpDelete, "fatal", routerIgnore},
		{kafkasink.OpTruncate, "fatal", routerIgnore},
		{kafkasink.OpUpdate, "warn", routerIgnore},
		{kafkasink.OpUpdate, "error", routerIgnore},
		{kafkasink.OpUpdate, "fatal", routerFatal},
	} {
		r.invalid = tc.behavior
		e := kafkasink.Event{Op: tc.op, Schema: "public", Table: "outbox", After: row("p")}
		if got := r.route(&e); got != tc.want || (got == routerRecord) != (e.Record != nil) {
			t.Errorf("%s under %s: %d (record %v), want %d", tc.op, tc.behavior, got, e.Record, tc.want)
		}
	}
	other := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "orders", After: row("p")}
	if r.route(&other) != routerPass || other.Record != nil {
		t.Errorf("a row of another table was routed")
	}
	if retryable(&EventRouterError{Table: "public.outbox"}) {
		t.Errorf("EventRouterError is retried: Run would loop on the same update")
	}
}
