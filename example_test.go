package kafkasink_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
)

// A sink for a production cluster: TLS with a private CA, SCRAM, topics per
// table from a template, the Debezium envelope for existing consumers.
// Compile-only: it needs a broker.
func ExampleNew() {
	ctx := context.Background()
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers: []string{"broker-1:9093", "broker-2:9093"},
		SinkID:  "orders-cdc",
		TLS:     &kafkasink.TLS{CAFile: "/etc/kafka/ca.pem"},
		SASL: &kafkasink.SASL{
			Mechanism: kafkasink.SASLScramSHA512,
			Username:  "orders-cdc",
			Password:  kafkasink.Secret("from your secret store"),
		},
		Topics:  kafkasink.Topics{Template: "cdc.{schema}.{table}", Partitions: 12, ReplicationFactor: 3},
		Encoder: debezium.Encoder{Name: "orders"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(ctx)
}

// Writing a batch and handling each class of error.
func ExampleSink_Write() {
	ctx := context.Background()
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1))
	defer cluster.Close()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: cluster.ListenAddrs(), SinkID: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(ctx)

	batch := kafkasink.Batch{Events: []kafkasink.Event{{
		Op: kafkasink.OpInsert, Schema: "public", Table: "orders",
		Position: kafkasink.Position{LSN: 0x16B3748, Index: 0},
		Commit:   time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Key:      []string{"id"},
		After:    kafkasink.Row{{Name: "id", Value: int64(1)}, {Name: "total", Value: kafkasink.Decimal("19.95")}},
	}}}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := sink.Write(ctx, batch)
		switch {
		case err == nil:
			fmt.Println("delivered; acknowledge the source up to", sink.Checkpoint().Position)
			return
		case kafkasink.IsRetryable(err):
			// The same batch again, never the next one: nothing is
			// duplicated, and skipping it would lose it.
			select {
			case <-ctx.Done():
				log.Fatal(context.Cause(ctx))
			case <-time.After(backoff):
			}
		case errors.Is(err, kafkasink.ErrFenced):
			log.Fatal("another instance took over: ", err)
		default:
			log.Fatal(err) // fatal, events rejected (kafkasink.IsRejected), or ctx ended
		}
	}
	// Output:
	// delivered; acknowledge the source up to 0/16B3748:0
}

func ExampleParsePosition() {
	p, err := kafkasink.ParsePosition("16/B374D848:3")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.LSN, p.Index, p.String())
	// Output:
	// 16/B374D848 3 16/B374D848:3
}

func ExampleAppendKey() {
	e := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "accounts",
		After: kafkasink.Row{{Name: "region", Value: "eu|west"}, {Name: "id", Value: int64(42)}, {Name: "name", Value: "Ada"}}}
	text, _ := kafkasink.AppendKey(nil, &e, []string{"region", "id"}, kafkasink.KeyText)
	js, _ := kafkasink.AppendKey(nil, &e, []string{"region", "id"}, kafkasink.KeyJSON)
	fmt.Println(string(text))
	fmt.Println(string(js))
	fmt.Println(kafkasink.PartitionFor([]byte("foobar"), 12))
	// Output:
	// eu\|west|42
	// {"region":"eu|west","id":42}
	// 6
}
