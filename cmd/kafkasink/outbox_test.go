package main

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/outbox"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// TestOutboxFlags: -outbox-topics turns the outbox on with its
// allow-list (from the flag or $KAFKASINK_OUTBOX_TOPICS), the other outbox
// flags go with it, and without it they are refused, naming it.
func TestOutboxFlags(t *testing.T) {
	base := []string{"-pg", "postgres://h/db", "-brokers", "b:9092"}
	for _, tc := range []struct {
		args []string
		env  string
		want *pgcdc.Outbox
	}{
		{nil, "", nil},
		{[]string{"-outbox-topics", "orders.events, billing.*"}, "", &pgcdc.Outbox{Prefix: "kafkasink.outbox", Topics: []string{"orders.events", "billing.*"}}},
		{[]string{"-outbox-prefix", "app.outbox", "-outbox-max-bytes", "2000"}, "*", &pgcdc.Outbox{Prefix: "app.outbox", Topics: []string{"*"}, MaxBytes: 2000}},
	} {
		getenv := func(name string) string {
			if name == "KAFKASINK_OUTBOX_TOPICS" {
				return tc.env
			}
			return ""
		}
		o, err := parse(append(base, tc.args...), getenv, new(bytes.Buffer))
		if err != nil {
			t.Fatal(err)
		}
		_, pcfg, err := o.configs(nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if !reflect.DeepEqual(pcfg.Outbox, tc.want) {
			t.Errorf("%q with $KAFKASINK_OUTBOX_TOPICS=%q: Outbox %+v, want %+v", tc.args, tc.env, pcfg.Outbox, tc.want)
		}
	}
	o, err := parse(append(base, "-outbox-prefix", "app.outbox"), func(string) string { return "" }, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.configs(nil); err == nil || !strings.Contains(err.Error(), "only -outbox-topics turns on") {
		t.Errorf("-outbox-prefix without -outbox-topics: %v, want an error naming -outbox-topics", err)
	}
}

// TestOutboxOnTheWire runs the program with -outbox-topics on the real
// PostgreSQL and Kafka: a transaction's outbox message reaches its topic
// with its key, value and headers, once; one for a topic outside the
// allow-list reaches -dead-letter-topic with its content; a rolled-back
// transaction's message never appears.
func TestOutboxOnTheWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, brokers, name, db := realTable(ctx, t, "kafkasink_cmd_outbox")
	events, dlq := name+".events", name+".dlq"
	t.Cleanup(func() {
		if cl, err := kgo.NewClient(kgo.SeedBrokers(brokers)); err == nil {
			kadm.NewClient(cl).DeleteTopics(context.Background(), events, dlq)
			cl.Close()
		}
	})
	args := []string{"-pg", pg, "-tables", "public." + name, "-slot", name, "-publication", name, "-topic-prefix", name,
		"-outbox-topics", name + ".ev*", "-outbox-prefix", name, "-dead-letter-topic", dlq, "-log-format", "text"}
	out, status, stop := startProgram(ctx, t, db, name, brokers, args)
	em := outbox.Emitter{Prefix: name}
	for i, tc := range []struct {
		topic  string
		commit bool
	}{{events, true}, {events, false}, {name + ".secret", true}} {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+name+" VALUES ($1, 'x')", i); err != nil {
				return err
			}
			err := em.Emit(ctx, tx, outbox.Message{Topic: tc.topic, Key: []byte("k"), Value: []byte(tc.topic),
				Headers: []outbox.Header{{Name: "n", Value: []byte("1")}}})
			if err == nil && !tc.commit {
				err = errRolledBack
			}
			return err
		})
		if err != nil && err != errRolledBack {
			t.Fatal(err)
		}
	}
	var msgs, dead []*kgo.Record
	waitFor(t, 60*time.Second, "the message and the dead letter", status, out, func() bool {
		msgs = kafkasinktest.ReadCommittedRaw(t, []string{brokers}, events)
		dead = kafkasinktest.ReadCommittedRaw(t, []string{brokers}, dlq)
		return len(msgs) >= 1 && len(dead) >= 1
	})
	stop()
	<-status
	msgs = kafkasinktest.ReadCommittedRaw(t, []string{brokers}, events)
	dead = kafkasinktest.ReadCommittedRaw(t, []string{brokers}, dlq)
	if len(msgs) != 1 || string(msgs[0].Key) != "k" || string(msgs[0].Value) != events || kafkasinktest.Header(msgs[0], "n") != "1" {
		t.Errorf("%d messages on %s, want the committed one with key k, value %s, header n=1: %v", len(msgs), events, events, msgs)
	}
	if len(dead) != 1 || string(dead[0].Value) != name+".secret" || kafkasinktest.Header(dead[0], kafkasink.HeaderTopic) != name+".secret" ||
		!strings.Contains(kafkasinktest.Header(dead[0], kafkasink.HeaderError), "the program's -outbox-topics") {
		t.Errorf("%d dead letters, want the message for %s naming -outbox-topics: %v", len(dead), name+".secret", dead)
	}
}

var errRolledBack = errors.New("rolled back")

// TestEventRouterFlags: -event-router-tables turns Debezium's EventRouter
// on, -event-router gives its properties (placements separated by ';'),
// and -event-router alone is refused, naming -event-router-tables.
func TestEventRouterFlags(t *testing.T) {
	base := []string{"-pg", "postgres://h/db", "-brokers", "b:9092"}
	o, err := parse(append(base, "-event-router-tables", "public.outbox",
		"-event-router", "route.by.field=kind, table.fields.additional.placement=type:header:t;x:header"), func(string) string { return "" }, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	_, pcfg, err := o.configs(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &pgcdc.EventRouter{Tables: []string{"public.outbox"}, Properties: map[string]string{
		"route.by.field": "kind", "table.fields.additional.placement": "type:header:t,x:header"}}
	if !reflect.DeepEqual(pcfg.EventRouter, want) {
		t.Errorf("EventRouter %+v, want %+v", pcfg.EventRouter, want)
	}
	o, err = parse(append(base, "-event-router", "route.by.field=kind"), func(string) string { return "" }, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.configs(nil); err == nil || !strings.Contains(err.Error(), "-event-router-tables") {
		t.Errorf("-event-router alone: %v, want an error naming -event-router-tables", err)
	}
}
