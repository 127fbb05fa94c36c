package kafkasink_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// noHook implements none of the Hook interfaces.
type noHook struct{}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*kafkasink.Config)
		want [][]string // one entry per expected problem: substrings it must contain
	}{
		{"missing Brokers", func(c *kafkasink.Config) { c.Brokers = nil }, [][]string{{"Brokers"}}},
		{"empty broker entry", func(c *kafkasink.Config) { c.Brokers = []string{"a:1,b:2"} }, [][]string{{"Brokers", `"a:1,b:2"`}}},
		{"missing SinkID", func(c *kafkasink.Config) { c.SinkID = "" }, [][]string{{"SinkID"}}},
		{"bad SinkID chars", func(c *kafkasink.Config) { c.SinkID = "orders/eu" }, [][]string{{"SinkID", `"orders/eu"`}}},
		{"SinkID too long", func(c *kafkasink.Config) { c.SinkID = strings.Repeat("s", 201) }, [][]string{{"SinkID", "200 bytes"}}},
		{"Template and Prefix", func(c *kafkasink.Config) { c.Topics.Template = "cdc.{schema}.{table}"; c.Topics.Prefix = "cdc" },
			[][]string{{"Topics.Template", "Topics.Prefix"}}},
		{"unknown placeholder", func(c *kafkasink.Config) { c.Topics.Template = "cdc.{database}.{table}" },
			[][]string{{"Topics.Template", "{database}", "placeholder"}}},
		{"invalid Routes topic", func(c *kafkasink.Config) { c.Topics.Routes = map[string]string{"public.orders": "orders topic"} },
			[][]string{{`Topics.Routes["public.orders"]`, `"orders topic"`}}},
		{"Routes topic too long", func(c *kafkasink.Config) {
			c.Topics.Routes = map[string]string{"public.orders": strings.Repeat("t", 250)}
		}, [][]string{{`Topics.Routes["public.orders"]`, "250 bytes"}}},
		{"invalid Prefix", func(c *kafkasink.Config) { c.Topics.Prefix = "cdc:" }, [][]string{{"Topics.Prefix"}}},
		{"CommitTimeout equals TransactionTimeout", func(c *kafkasink.Config) {
			c.TransactionTimeout, c.CommitTimeout = 10*time.Second, 10*time.Second
		}, [][]string{{"CommitTimeout", "TransactionTimeout"}}},
		{"CommitTimeout above TransactionTimeout", func(c *kafkasink.Config) {
			c.TransactionTimeout, c.CommitTimeout = 10*time.Second, 20*time.Second
		}, [][]string{{"CommitTimeout 20s", "TransactionTimeout 10s"}}},
		{"TransactionTimeout below 1s", func(c *kafkasink.Config) { c.TransactionTimeout = 500 * time.Millisecond },
			[][]string{{"TransactionTimeout 500ms"}}},
		{"TransactionTimeout above 15m", func(c *kafkasink.Config) { c.TransactionTimeout = 16 * time.Minute },
			[][]string{{"TransactionTimeout 16m0s"}}},
		{"Acks lowered in ExactlyOnce", func(c *kafkasink.Config) { c.Acks = kafkasink.AcksLeader },
			[][]string{{"Acks", "exactly-once"}}},
		{"Acks lowered in Idempotent", func(c *kafkasink.Config) { c.Mode = kafkasink.Idempotent; c.Acks = kafkasink.AcksNone },
			[][]string{{"Acks", "idempotent"}}},
		{"TransactionalID outside ExactlyOnce", func(c *kafkasink.Config) { c.Mode = kafkasink.Plain; c.TransactionalID = "tx" },
			[][]string{{"TransactionalID", "plain"}}},
		{"MaxTransactionBytes below MaxRecordBytes", func(c *kafkasink.Config) {
			c.MaxRecordBytes, c.MaxTransactionBytes = 4096, 2048
		}, [][]string{{"MaxTransactionBytes 2048", "MaxRecordBytes 4096"}}},
		{"KeyColumns key without schema", func(c *kafkasink.Config) { c.KeyColumns = map[string][]string{"orders": {"id"}} },
			[][]string{{"KeyColumns", `"orders"`}}},
		{"KeyColumns empty column", func(c *kafkasink.Config) { c.KeyColumns = map[string][]string{"public.orders": {"id", ""}} },
			[][]string{{"KeyColumns", `"public.orders"`}}},
		{"DeadLetterTopic is CheckpointTopic", func(c *kafkasink.Config) { c.DeadLetterTopic = kafkasink.DefaultCheckpointTopic },
			[][]string{{"DeadLetterTopic", "CheckpointTopic"}}},
		{"DebeziumEncoder mode out of range", func(c *kafkasink.Config) {
			c.Encoder = debezium.Encoder{DecimalHandling: 3, BinaryHandling: 9}
		}, [][]string{{"DebeziumEncoder.DecimalHandling", "decimal.handling.mode", "3", "precise, double, string"},
			{"DebeziumEncoder.BinaryHandling", "binary.handling.mode", "9", "bytes, base64, base64-url-safe, hex"}}},
		{"*DebeziumEncoder mode out of range", func(c *kafkasink.Config) {
			c.Encoder = &debezium.Encoder{TimePrecision: 4, IntervalHandling: 2}
		}, [][]string{{"DebeziumEncoder.TimePrecision", "time.precision.mode", "4", "adaptive, adaptive_time_microseconds, connect, isostring"},
			{"DebeziumEncoder.IntervalHandling", "interval.handling.mode", "2", "numeric, string"}}},
		{"Hook implementing nothing", func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{noHook{}} },
			[][]string{{"Hooks[0]", "noHook"}}},
		{"ClientOptions TransactionalID", func(c *kafkasink.Config) { c.ClientOptions = []kgo.Opt{kgo.TransactionalID("x")} },
			[][]string{{"ClientOptions", "TransactionalID"}}},
		{"ClientOptions RequiredAcks", func(c *kafkasink.Config) {
			c.ClientOptions = []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck())}
		}, [][]string{{"ClientOptions", "RequiredAcks"}}},
		{"ClientOptions DisableIdempotentWrite", func(c *kafkasink.Config) { c.ClientOptions = []kgo.Opt{kgo.DisableIdempotentWrite()} },
			[][]string{{"ClientOptions", "DisableIdempotentWrite"}}},
		{"ClientOptions SeedBrokers", func(c *kafkasink.Config) { c.ClientOptions = []kgo.Opt{kgo.SeedBrokers("127.0.0.1:10")} },
			[][]string{{"ClientOptions", "SeedBrokers"}}},
		{"ClientOptions AllowAutoTopicCreation", func(c *kafkasink.Config) { c.ClientOptions = []kgo.Opt{kgo.AllowAutoTopicCreation()} },
			[][]string{{"ClientOptions", "AllowAutoTopicCreation"}}},
		{"ClientOptions RecordPartitioner", func(c *kafkasink.Config) {
			c.ClientOptions = []kgo.Opt{kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}
		}, [][]string{{"ClientOptions", "RecordPartitioner", "murmur2"}}},
		{"ClientOptions WithLogger", func(c *kafkasink.Config) {
			c.ClientOptions = []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(io.Discard, kgo.LogLevelInfo, nil))}
		}, [][]string{{"ClientOptions", "WithLogger", "Config.Logger"}}},
		{"ClientOptions consumer option", func(c *kafkasink.Config) { c.ClientOptions = []kgo.Opt{kgo.ConsumeTopics("x")} },
			[][]string{{"ClientOptions", "consumer option"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := validConfig()
			tt.edit(&cfg)
			ce := configError(t, cfg)
			checkProblems(t, ce.Problems, tt.want)
		})
	}

	t.Run("all problems in one error", func(t *testing.T) {
		t.Parallel()
		cfg := kafkasink.Config{
			SinkID:             "bad id",
			TransactionTimeout: 10 * time.Second,
			CommitTimeout:      10 * time.Second,
			Topics:             kafkasink.Topics{Template: "{schema}.{table}", Prefix: "cdc"},
			KeyColumns:         map[string][]string{"orders": {"id"}},
			Hooks:              []kafkasink.Hook{noHook{}},
			ClientOptions:      []kgo.Opt{kgo.ConsumeTopics("x")},
		}
		ce := configError(t, cfg)
		want := [][]string{
			{"Brokers"},
			{"SinkID", `"bad id"`},
			{"CommitTimeout"},
			{"Topics.Template", "Topics.Prefix"},
			{"KeyColumns", `"orders"`},
			{"Hooks[0]"},
			{"ClientOptions", "consumer option"},
		}
		checkProblems(t, ce.Problems, want)
		for _, p := range ce.Problems {
			if !strings.Contains(ce.Error(), p) {
				t.Errorf("Error() %q leaves out problem %q", ce.Error(), p)
			}
		}
	})

	t.Run("harmless ClientOptions accepted", func(t *testing.T) {
		t.Parallel()
		_, brokers := sinktest.Cluster(t)
		s, err := startSink(t, brokers, "harmless-options", func(c *kafkasink.Config) {
			c.ClientOptions = []kgo.Opt{
				kgo.ProducerBatchCompression(kgo.ZstdCompression()),
				kgo.ClientID("my-client"), // not owned: the sink's own client id is only a default
				kgo.ProduceRequestTimeout(20 * time.Second),
			}
		})
		if err != nil {
			t.Fatalf("New with harmless ClientOptions: %v", err)
		}
		events := sinktest.Inserts("public", "harmless", 100, 1, 3)
		write(t, s, events)
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.harmless"), events)
	})
}

func TestConfigStringHidesSecrets(t *testing.T) {
	t.Parallel()
	const password = "s3cr3t-hunter2"
	cfg := kafkasink.Config{
		Brokers: []string{"broker-1:9092"},
		SinkID:  "secretive",
		ClientOptions: []kgo.Opt{
			kgo.SASL(plain.Auth{User: "alice", Pass: password}.AsMechanism()),
		},
	}
	for _, verb := range []string{"%v", "%+v", "%s"} {
		got := fmt.Sprintf(verb, cfg)
		if strings.Contains(got, password) {
			t.Errorf("Sprintf(%q, cfg) = %q shows the password", verb, got)
		}
		// It must still describe the config, or the test proves nothing.
		for _, want := range []string{"broker-1:9092", `"secretive"`, "ClientOptions:1"} {
			if !strings.Contains(got, want) {
				t.Errorf("Sprintf(%q, cfg) = %q, want it to contain %q", verb, got, want)
			}
		}
	}
	// Nor does the error of an invalid config holding the same option.
	cfg.SinkID = ""
	ce := configError(t, cfg)
	if strings.Contains(ce.Error(), password) {
		t.Errorf("ConfigError %q shows the password", ce.Error())
	}
}

func TestTransactionTimeoutAboveBrokerMax(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t, kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "5000"}))
	_, err := startSink(t, brokers, "txn-timeout", func(c *kafkasink.Config) { c.TransactionTimeout = 10 * time.Second })
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("New: %v (%T), want a *ConfigError", err, err)
	}
	checkProblems(t, ce.Problems, [][]string{{"TransactionTimeout 10s", "transaction.max.timeout.ms"}})

	// Within the broker's limit, the same cluster accepts the sink.
	if _, err := startSink(t, brokers, "txn-timeout-ok", func(c *kafkasink.Config) { c.TransactionTimeout = 5 * time.Second }); err != nil {
		t.Fatalf("New with TransactionTimeout at the broker's max: %v", err)
	}
}

// countProduced is a franz-go hook, as kprom and kotel are.
type countProduced struct{ n atomic.Int64 }

func (c *countProduced) OnProduceRecordUnbuffered(*kgo.Record, error) { c.n.Add(1) }

// franz-go's hooks (kprom, kotel and the like) pass through ClientOptions
// with kgo.WithHooks and see the sink's records.
func TestClientOptionsHooksPassThrough(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	hook := &countProduced{}
	s := newSink(t, brokers, "hooks", func(c *kafkasink.Config) { c.ClientOptions = []kgo.Opt{kgo.WithHooks(hook)} })
	write(t, s, sinktest.Inserts("public", "orders", 100, 1, 5))
	if got := hook.n.Load(); got < 5 {
		t.Fatalf("the hook saw %d records, want the 5 events' at least", got)
	}
}
