package kafkasink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func TestTopicRouting(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	route := func(schema, table string) (string, error) { return "fn." + schema + "." + table, nil }
	tests := []struct {
		name   string
		topics kafkasink.Topics
		want   string // with %s for the schema
	}{
		{"default prefix", kafkasink.Topics{}, "kafkasink.%s.orders"},
		{"prefix", kafkasink.Topics{Prefix: "cdc"}, "cdc.%s.orders"},
		{"template", kafkasink.Topics{Template: "{table}-{schema}.v1"}, "orders-%s.v1"},
		{"routes over prefix", kafkasink.Topics{Routes: map[string]string{"SCHEMA.orders": "orders.special.%s"}}, "orders.special.%s"},
		{"routes over template", kafkasink.Topics{Template: "t.{schema}.{table}", Routes: map[string]string{"SCHEMA.orders": "orders.routed.%s"}}, "orders.routed.%s"},
		{"routes for another table", kafkasink.Topics{Template: "t.{schema}.{table}", Routes: map[string]string{"SCHEMA.other": "other.%s"}}, "t.%s.orders"},
		{"route func wins", kafkasink.Topics{Route: route, Template: "t.{schema}.{table}", Routes: map[string]string{"SCHEMA.orders": "orders.lost.%s"}}, "fn.%s.orders"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			schema := fmt.Sprintf("s%d", i)
			topics := tt.topics
			if topics.Routes != nil {
				topics.Routes = make(map[string]string)
				for k, v := range tt.topics.Routes {
					topics.Routes[strings.Replace(k, "SCHEMA", schema, 1)] = fmt.Sprintf(v, schema)
				}
			}
			want := fmt.Sprintf(tt.want, schema)
			s := newSink(t, brokers, "routing-"+schema, func(c *kafkasink.Config) { c.Topics = topics })
			events := sinktest.Inserts(schema, "orders", 100, 1, 2)
			write(t, s, events)
			recs := sinktest.ReadCommitted(t, brokers, want)
			sinktest.CheckExactlyOnce(t, recs, events)
			for _, r := range recs {
				if r.Topic != want {
					t.Errorf("record in %s, want %s", r.Topic, want)
				}
			}
			if def := "kafkasink." + schema + ".orders"; def != want && topicExists(t, brokers, def) {
				t.Errorf("default topic %s was created too", def)
			}
		})
	}
}

func TestTopicNameValidation(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	// The table name is the topic name; table "EMPTY" routes to "".
	s := newSink(t, brokers, "names", func(c *kafkasink.Config) {
		c.Topics.Route = func(_, table string) (string, error) { return strings.TrimPrefix(table, "EMPTY"), nil }
	})
	tests := []struct {
		name, topic string
		ok          bool
	}{
		{"249 bytes", strings.Repeat("a", 249), true},
		{"all allowed characters", "Az09._-", true},
		{"250 bytes", strings.Repeat("b", 250), false},
		{"slash", "a/b", false},
		{"space", "a b", false},
		{"non-ASCII", "caf\u00e9", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"empty", "EMPTY", false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { // sequential: one sink
			e := sinktest.Inserts("public", tt.topic, kafkasink.LSN(100+i), 1, 1)
			err := tryWrite(t, s, kafkasink.Batch{Events: e})
			if tt.ok {
				if err != nil {
					t.Fatalf("Write to topic %q: %v", tt.topic, err)
				}
				sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, tt.topic), e)
				return
			}
			checkRejected(t, err, e[0], kafkasink.ReasonUnroutable, "")
		})
	}
}

func TestTopicsMustExist(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t, kfake.AllowAutoTopicCreation())
	const (
		present = "kafkasink.public.present"
		absent  = "kafkasink.public.absent"
	)
	createTopic(t, brokers, present, 2, nil)
	s := newSink(t, brokers, "must-exist", func(c *kafkasink.Config) { c.Topics.MustExist = true })

	ok := sinktest.Inserts("public", "present", 100, 1, 2)
	write(t, s, ok)

	missing := sinktest.Inserts("public", "absent", 200, 1, 2)
	err := tryWrite(t, s, kafkasink.Batch{Events: missing})
	if !errors.Is(err, kafkasink.ErrTopicMissing) || !kafkasink.IsFatal(err) {
		t.Fatalf("Write to a missing topic: %v, want fatal ErrTopicMissing", err)
	}
	if !strings.Contains(err.Error(), absent) {
		t.Errorf("error %q does not name topic %s", err, absent)
	}
	if topicExists(t, brokers, absent) {
		t.Errorf("topic %s exists after the failed Write: the sink let it be auto-created", absent)
	}
	if got := s.Checkpoint().Position; got != ok[1].Position {
		t.Errorf("checkpoint %s, want %s", got, ok[1].Position)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, present), ok)

	// Events for the present topic come first: exactly-once sends them
	// while it encodes the rest, then the missing topic fails the batch
	// and aborts that transaction. The next Write still works.
	mixed := append(sinktest.Inserts("public", "present", 300, 3, 3), sinktest.Inserts("public", "absent", 300, 9, 1)...)
	for i := range mixed {
		mixed[i].Position.Index = uint64(i)
	}
	if err := tryWrite(t, s, kafkasink.Batch{Events: mixed}); !errors.Is(err, kafkasink.ErrTopicMissing) {
		t.Fatalf("Write of a batch ending with a missing topic: %v, want ErrTopicMissing", err)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, present), ok)
	more := sinktest.Inserts("public", "present", 400, 3, 2)
	write(t, s, more)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, present), append(ok, more...))
}

func TestCreatedTopicSettings(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.configured"
	s := newSink(t, brokers, "configured", func(c *kafkasink.Config) {
		c.Topics.Partitions = 3
		c.Topics.ReplicationFactor = 1
		c.Topics.Configs = map[string]string{"retention.ms": "3600000", "max.message.bytes": "500000"}
	})
	write(t, s, sinktest.Inserts("public", "configured", 100, 1, 1))

	adm := admin(t, brokers)
	details, err := adm.ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(details[topic].Partitions); n != 3 {
		t.Errorf("%s has %d partitions, want 3", topic, n)
	}
	if rf := details[topic].Partitions.NumReplicas(); rf != 1 {
		t.Errorf("%s has replication factor %d, want 1", topic, rf)
	}
	rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]string)
	for _, c := range rc.Configs {
		got[c.Key] = c.MaybeValue()
	}
	for k, want := range map[string]string{"retention.ms": "3600000", "max.message.bytes": "500000"} {
		if got[k] != want {
			t.Errorf("%s: %s=%q, want %q", topic, k, got[k], want)
		}
	}
}

func TestTopicDeletedMidRun(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.doomed"
	s := newSink(t, brokers, "doomed")
	first := sinktest.Inserts("public", "doomed", 100, 1, 2)
	write(t, s, first)

	resp, err := admin(t, brokers).DeleteTopics(context.Background(), topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}

	err = tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "doomed", 200, 3, 2)})
	if !errors.Is(err, kafkasink.ErrTopicMissing) || !kafkasink.IsFatal(err) {
		t.Fatalf("Write after the topic was deleted: %v, want fatal ErrTopicMissing", err)
	}
	var we *kafkasink.WriteError
	if !errors.As(err, &we) || we.Topic != topic {
		t.Errorf("error %v, want a *WriteError for %s", err, topic)
	}
	if got := s.Checkpoint().Position; got != first[1].Position {
		t.Errorf("checkpoint %s, want unchanged %s", got, first[1].Position)
	}
	if topicExists(t, brokers, topic) {
		t.Errorf("%s was recreated", topic)
	}
}

func TestCheckpointTopicSafety(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		configs map[string]string
		safe    bool
	}{
		{"delete", map[string]string{"cleanup.policy": "delete"}, false},
		{"compact,delete with retention", map[string]string{"cleanup.policy": "compact,delete"}, false},
		{"compact,delete without retention", map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "-1", "retention.bytes": "-1"}, true},
		{"compact", map[string]string{"cleanup.policy": "compact"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, brokers := sinktest.Cluster(t)
			createTopic(t, brokers, kafkasink.DefaultCheckpointTopic, 1, tt.configs)
			_, err := startSink(t, brokers, "ckpt-safety")
			if tt.safe {
				if err != nil {
					t.Fatalf("New with checkpoint topic %v: %v", tt.configs, err)
				}
				return
			}
			if !errors.Is(err, kafkasink.ErrUnsafeCheckpointTopic) || !kafkasink.IsFatal(err) {
				t.Fatalf("New with checkpoint topic %v: %v, want fatal ErrUnsafeCheckpointTopic", tt.configs, err)
			}
			for _, want := range []string{kafkasink.DefaultCheckpointTopic, "cleanup.policy=" + tt.configs["cleanup.policy"], "--add-config cleanup.policy=compact"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// Idempotent mode accepts the topic: losing a checkpoint
			// only means redelivery there.
			s := newSink(t, brokers, "ckpt-safety-idem", func(c *kafkasink.Config) { c.Mode = kafkasink.Idempotent })
			events := sinktest.Inserts("public", "ckpt_safety", 100, 1, 2)
			write(t, s, events)
			if got := s.Checkpoint().Position; got != events[1].Position {
				t.Errorf("checkpoint %s, want %s", got, events[1].Position)
			}
		})
	}

	t.Run("created compacted", func(t *testing.T) {
		t.Parallel()
		_, brokers := sinktest.Cluster(t)
		newSink(t, brokers, "ckpt-created")
		rcs, err := admin(t, brokers).DescribeTopicConfigs(context.Background(), kafkasink.DefaultCheckpointTopic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(kafkasink.DefaultCheckpointTopic, nil)
		if err != nil {
			t.Fatal(err)
		}
		policy := ""
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" {
				policy = c.MaybeValue()
			}
		}
		if policy != "compact" {
			t.Errorf("created checkpoint topic has cleanup.policy=%q, want compact", policy)
		}
		details, err := admin(t, brokers).ListTopics(context.Background(), kafkasink.DefaultCheckpointTopic)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(details[kafkasink.DefaultCheckpointTopic].Partitions); n != 1 {
			t.Errorf("created checkpoint topic has %d partitions, want 1", n)
		}
	})
}

// TestTopicConfigsWaitForBrokerToKnowTopic answers the first describe of
// the checkpoint topic's configuration as a broker does that has not yet
// learnt of a just-created topic (seen on the 3-broker cluster): New waits
// and succeeds instead of failing.
func TestTopicConfigsWaitForBrokerToKnowTopic(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	var unknown atomic.Int32
	c.ControlKey(kmsg.DescribeConfigs.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if unknown.Load() == 2 {
			return nil, nil, false
		}
		unknown.Add(1)
		dreq := req.(*kmsg.DescribeConfigsRequest)
		resp := dreq.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range dreq.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp, nil, true
	})
	if _, err := startSink(t, brokers, "configs-lag"); err != nil {
		t.Fatalf("New while the broker did not know the checkpoint topic yet: %v", err)
	}
	if n := unknown.Load(); n != 2 {
		t.Fatalf("%d UNKNOWN_TOPIC_OR_PARTITION answers given, want 2", n)
	}
}
