package pgcdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/outbox"
)

// BenchmarkOutboxCommitToVisible is the latency of an outbox message from
// its transaction's commit returning to a read_committed consumer
// receiving it, through Run and an exactly-once sink on the real brokers,
// with Run's default batching; p50 and p99 over b.N messages, each sent
// after the one before arrived:
//
//	eval "$(scripts/testenv.sh env)"
//	go test -run '^$' -bench BenchmarkOutboxCommitToVisible -benchtime 300x ./pgcdc
func BenchmarkOutboxCommitToVisible(b *testing.B) {
	pg, brokers := realEnv(b)
	ctx := context.Background()
	name := fmt.Sprintf("pgcdc_outboxlat_%06d", rand.IntN(1e6))
	topic := name + ".events"
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY)"); err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cl.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		dropTestObjects(cctx, db, name)
		if acl, err := kgo.NewClient(kgo.SeedBrokers(brokers...)); err == nil {
			kadm.NewClient(acl).DeleteTopics(cctx, topic, name+".checkpoints", name+".public."+name)
			acl.Close()
		}
	})
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: name, CheckpointTopic: name + ".checkpoints",
		Topics: kafkasink.Topics{Prefix: name, Partitions: 1}})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close(context.Background())
	cfg := Config{ConnString: pg, Slot: name, Publication: name, Tables: []string{"public." + name},
		CreateSlot: true, CreatePublication: true, Outbox: &Outbox{Prefix: name, Topics: []string{topic}}}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(rctx, cfg, sink) }()
	defer func() { stop(); <-done }()

	em := outbox.Emitter{Prefix: name}
	send := func(i int) time.Time {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			return em.Emit(ctx, tx, outbox.Message{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
		})
		if err != nil {
			b.Fatal(err)
		}
		return time.Now()
	}
	receive := func(i int) time.Time {
		want := strconv.Itoa(i)
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			fs := cl.PollFetches(pctx)
			cancel()
			got := false
			fs.EachRecord(func(r *kgo.Record) { got = got || string(r.Key) == want })
			if got {
				return time.Now()
			}
		}
		b.Fatalf("message %d did not arrive within 60s", i)
		return time.Time{}
	}
	// The first message waits for the slot, the topic and the
	// consumer's assignment: not counted.
	for slot := false; !slot; time.Sleep(100 * time.Millisecond) {
		db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1 AND active)", name).Scan(&slot)
	}
	send(-1)
	receive(-1)
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		sent := send(i)
		lat = append(lat, receive(i).Sub(sent))
		i++
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
