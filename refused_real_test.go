package kafkasink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// encodeHook is JSONEncoder, running do once, before it encodes the event
// at at: a way to change the broker while a Write is in flight.
type encodeHook struct {
	kafkasink.JSONEncoder
	at   kafkasink.Position
	once sync.Once
	do   func()
}

func (h *encodeHook) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if e.Position == h.at {
		h.once.Do(h.do)
	}
	return h.JSONEncoder.Encode(dst, e)
}

// incompressible returns n letters that snappy does not shrink much, so
// that a record's size at the broker is about its size in the sink.
func incompressible(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 30))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return string(b)
}

// alterTopic sets a topic config on the real broker and waits until the
// broker describes it so, and a moment more for its log to apply it.
func alterTopic(t *testing.T, adm *kadm.Client, topic, name, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: kadm.StringPtr(value)}}, topic)
	if err == nil {
		_, err = resps.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("setting %s=%s on %s: %v", name, value, topic, err)
	}
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == name && c.Value != nil && *c.Value == value {
				time.Sleep(time.Second)
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRealMaxMessageBytesLoweredDuringWrite: a topic's max.message.bytes is
// lowered from 1 MB to 3000 on the real broker while a Write is encoding
// its batch (the sink read the old limit at start, and kgo keeps making
// batches by it). The broker then refuses the batches of small records as
// too large, and the four records of 5000 bytes on their own. The Write
// dead-letters the four (too_large, MESSAGE_TOO_LARGE) and delivers every
// other event once, read_committed; the next Write's pre-check uses the
// limit read again and rejects a large event before sending it. Before
// quarantining, the Write failed with a fatal ErrUnexpected.
func TestRealMaxMessageBytesLoweredDuringWrite(t *testing.T) {
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	topic, dlq := name+".sized", name+".dlq"
	createTopic(t, brokers, topic, 3, map[string]string{"max.message.bytes": "1000000"})
	adm := admin(t, brokers)

	b := sinktest.Inserts("public", "sized", 200, 1, 400)
	var large, rest []kafkasink.Event
	for i := range b {
		if i%97 == 60 {
			b[i] = withColumn(b[i], "name", incompressible(5000, uint64(i)))
			large = append(large, b[i])
			continue
		}
		rest = append(rest, b[i])
	}
	var logged sinktest.SyncBuffer
	enc := &encodeHook{at: b[50].Position, do: func() { alterTopic(t, adm, topic, "max.message.bytes", "3000") }}
	s := newSink(t, brokers, name, func(c *kafkasink.Config) {
		c.Topics.Routes = map[string]string{"public.sized": topic}
		c.CheckpointTopic = name + ".ckpt"
		c.DeadLetterTopic = dlq
		c.Encoder = enc
		c.Logger = slog.New(slog.NewJSONHandler(&logged, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	started := time.Now()
	if err := tryWrite(t, s, kafkasink.Batch{Events: b}); err != nil {
		t.Fatalf("Write: %v, want the too large records dead-lettered and the rest delivered", err)
	}
	t.Logf("Write of %d events took %v, with the limit lowered during it", len(b), time.Since(started))
	if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), rest)
	dead := sinktest.ReadCommitted(t, brokers, dlq)
	sinktest.CheckExactlyOnce(t, dead, large)
	// More records failed than were refused: the broker refused batches
	// of small records too, which the probe sent again in runs.
	var probes int
	for _, line := range strings.Split(logged.String(), "\n") {
		var l struct {
			Msg             string
			Failed, Refused int
			Rounds          int
		}
		if json.Unmarshal([]byte(line), &l) != nil || !strings.HasPrefix(l.Msg, "found the records the broker refuses") {
			continue
		}
		probes++
		t.Logf("probe: %d records failed, %d refused, %d rounds", l.Failed, l.Refused, l.Rounds)
		if l.Refused != len(large) || l.Failed <= l.Refused {
			t.Errorf("probe found %d refused among %d failed, want the %d large ones among more", l.Refused, l.Failed, len(large))
		}
	}
	if probes != 1 {
		t.Errorf("%d probes logged, want 1", probes)
	}
	for _, r := range dead {
		if got := sinktest.Header(r, kafkasink.HeaderReason); got != string(kafkasink.ReasonTooLarge) {
			t.Errorf("dead letter reason %q, want too_large", got)
		}
		if got := sinktest.Header(r, kafkasink.HeaderError); !strings.Contains(got, "MESSAGE_TOO_LARGE") || !strings.Contains(got, "3000") {
			t.Errorf("dead letter error %q does not name MESSAGE_TOO_LARGE and the new limit", got)
		}
	}

	// The cached limit was read again: the pre-check rejects the next
	// large event before it is sent.
	c := sinktest.Inserts("public", "sized", 300, 1000, 3)
	c[1] = withColumn(c[1], "name", incompressible(5000, 1))
	if err := tryWrite(t, s, kafkasink.Batch{Events: c}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	dead = sinktest.ReadCommitted(t, brokers, dlq)
	last := dead[len(dead)-1]
	if got := sinktest.Header(last, kafkasink.HeaderError); !strings.Contains(got, "max.message.bytes 3000") || strings.Contains(got, "MESSAGE_TOO_LARGE") {
		t.Errorf("the next large event's dead letter says %q, want the sink's own check against max.message.bytes 3000", got)
	}
}

// TestRealPolicyRefusesRecord: the real broker refuses a record by the
// topic's policy. The topic was not compacted when the sink first used it,
// and is made compacted while the sink runs; a keyless event's record (a
// null key) then gets INVALID_RECORD ("Compacted topic cannot accept
// message without key"). With a dead-letter topic the event is
// dead-lettered with the code (reason refused) and every other event is
// delivered once, read_committed; without one the Write is rejected naming
// the event, nothing of the batch is visible, and the batch without it is
// delivered once. Either way the next keyless event is refused by the
// sink's own check (no_key): the topic's compaction was read again. Before
// quarantining, the Write failed with a fatal ErrUnexpected.
func TestRealPolicyRefusesRecord(t *testing.T) {
	for _, withDLQ := range []bool{true, false} {
		t.Run(map[bool]string{true: "dead-letter", false: "rejected"}[withDLQ], func(t *testing.T) {
			brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
			topic, dlq := name+".items", name+".dlq"
			createTopic(t, brokers, topic, 3, map[string]string{"cleanup.policy": "delete"})
			s := newSink(t, brokers, name, func(c *kafkasink.Config) {
				c.Topics.Routes = map[string]string{"public.items": topic}
				c.CheckpointTopic = name + ".ckpt"
				if withDLQ {
					c.DeadLetterTopic = dlq
				}
			})
			a := sinktest.Inserts("public", "items", 100, 1, 5)
			write(t, s, a)
			alterTopic(t, admin(t, brokers), topic, "cleanup.policy", "compact")

			b := sinktest.Inserts("public", "items", 200, 6, 40)
			b[17].Key, b[17].Keyless = nil, true
			keyless := b[17]
			rest := append(append([]kafkasink.Event(nil), b[:17]...), b[18:]...)
			err := tryWrite(t, s, kafkasink.Batch{Events: b})
			if withDLQ {
				if err != nil {
					t.Fatalf("Write: %v, want the keyless event dead-lettered and the rest delivered", err)
				}
				sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append([]kafkasink.Event(nil), a...), rest...))
				dead := sinktest.ReadCommitted(t, brokers, dlq)
				sinktest.CheckExactlyOnce(t, dead, []kafkasink.Event{keyless})
				if got := sinktest.Header(dead[0], kafkasink.HeaderReason); got != string(kafkasink.ReasonRefused) {
					t.Errorf("dead letter reason %q, want refused", got)
				}
				if got := sinktest.Header(dead[0], kafkasink.HeaderError); !strings.Contains(got, "INVALID_RECORD") || !strings.Contains(got, topic) {
					t.Errorf("dead letter error %q does not name INVALID_RECORD and the topic", got)
				}
			} else {
				checkRejected(t, err, keyless, kafkasink.ReasonRefused, topic, "INVALID_RECORD")
				var re *kafkasink.RejectedError
				errors.As(err, &re)
				if !errors.Is(re.Rejections[0].Err, kerr.InvalidRecord) {
					t.Errorf("rejection %v does not wrap INVALID_RECORD", re.Rejections[0].Err)
				}
				sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), a)
				write(t, s, rest)
				sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append([]kafkasink.Event(nil), a...), rest...))
			}

			// The topic's compaction was read again: the sink's own
			// check refuses the next keyless event.
			c := sinktest.Inserts("public", "items", 300, 100, 2)
			c[0].Key, c[0].Keyless = nil, true
			err = tryWrite(t, s, kafkasink.Batch{Events: c})
			if withDLQ {
				if err != nil {
					t.Fatalf("Write: %v", err)
				}
				dead := sinktest.ReadCommitted(t, brokers, dlq)
				if got := sinktest.Header(dead[len(dead)-1], kafkasink.HeaderReason); got != string(kafkasink.ReasonNoKey) || !bytes.Contains(dead[len(dead)-1].Value, []byte(`"id":100`)) {
					t.Errorf("the next keyless event's dead letter has reason %q, want no_key", got)
				}
				return
			}
			checkRejected(t, err, c[0], kafkasink.ReasonNoKey, topic, "compacted")
		})
	}
}
