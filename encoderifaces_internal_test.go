package kafkasink

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// validatingEncoder is an Encoder whose Validate returns err.
type validatingEncoder struct {
	JSONEncoder
	err error
}

func (v validatingEncoder) Validate() error { return v.err }

// TestValidatorProblems: New reports what an Encoder's Validate returns
// with its own problems: each problem of a *ConfigError, else the
// error's text; nil adds none.
func TestValidatorProblems(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want []string
	}{
		{"nil", nil, nil},
		{"ConfigError", &ConfigError{Problems: []string{"Encoder: first", "Encoder: second"}}, []string{"Encoder: first", "Encoder: second"}},
		{"other error", errors.New("Encoder: plain"), []string{"Encoder: plain"}},
	} {
		cfg := Config{Brokers: []string{"localhost:9092"}, SinkID: "s", Encoder: validatingEncoder{err: c.err}}.withDefaults()
		err := cfg.validate()
		var ce *ConfigError
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v, want no problem", c.name, err)
			}
			continue
		}
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a *ConfigError", c.name, err)
		}
		if got := strings.Join(ce.Problems, "|"); got != strings.Join(c.want, "|") {
			t.Errorf("%s: problems %q, want %q", c.name, ce.Problems, c.want)
		}
	}
}

// sizedEncoder is a ValueSizer that knows its values reach n bytes.
type sizedEncoder struct {
	JSONEncoder
	n int
}

func (s sizedEncoder) MinValueSize(*Event) int { return s.n }

// TestMinValueSizeOfValueSizer: the size hint is the built-in encoders'
// own bound, a ValueSizer's MinValueSize, and 0 for an Encoder that is
// neither, even one that embeds JSONEncoder (its values may be anything).
func TestMinValueSizeOfValueSizer(t *testing.T) {
	t.Parallel()
	e := &Event{Op: OpInsert, Schema: "s", Table: "t", After: Row{{Name: "v", Value: strings.Repeat("x", 100)}}}
	for _, c := range []struct {
		name string
		enc  Encoder
		want int
	}{
		{"JSONEncoder", JSONEncoder{}, 100},
		{"*UpsertEncoder", &UpsertEncoder{}, 100},
		{"ValueSizer", sizedEncoder{n: 42}, 42},
		{"*ValueSizer", &sizedEncoder{n: 7}, 7},
		{"JSONEncoder embedded", validatingEncoder{}, 0},
	} {
		if got := minValueSize(c.enc, e); got != c.want {
			t.Errorf("%s: minValueSize = %d, want %d", c.name, got, c.want)
		}
	}
}

// keyingFramer writes every key itself (AllKeysEncoder) and records
// around events on the checkpoint topic (Framer); explained, it says so
// (Explainer).
type keyingFramer struct {
	JSONEncoder
	explained bool
}

func (keyingFramer) EncodeKey(dst []byte, _ *Event, _ []string) ([]byte, error) { return dst, nil }
func (keyingFramer) EncodesAllKeys() bool                                       { return true }
func (keyingFramer) AppendKeyPayload(dst []byte, _ *Event, _ []string) ([]byte, error) {
	return dst, nil
}
func (keyingFramer) FrameTopic() string { return DefaultCheckpointTopic }
func (keyingFramer) AppendFrame(dst []byte, _ *Event, _ bool) ([]byte, int) {
	return dst, 0
}

// explainedFramer is a keyingFramer that is an Explainer.
type explainedFramer struct{ keyingFramer }

func (explainedFramer) Explain(f Feature) (why, fix string) {
	return fmt.Sprintf("option %d is on", f), fmt.Sprintf("turn option %d off", f)
}

// TestExplainerWording: the sink's messages about what an Encoder does
// name the interface at issue, and add what an Explainer says: its
// reason, and its fix beside the sink's own.
func TestExplainerWording(t *testing.T) {
	t.Parallel()
	truncate := &Event{Op: OpTruncate, Schema: "public", Table: "t"}
	for _, c := range []struct {
		name    string
		enc     Encoder
		want    []string
		nullKey string
	}{
		{"without Explainer", keyingFramer{}, []string{
			"KeyFormat is text, but the Encoder writes every record key itself (AllKeysEncoder.EncodesAllKeys): set KeyFormat to KeyJSON (-key-format json)",
			`the topic of the records the Encoder writes around events (Framer.FrameTopic) "kafkasink.checkpoints" is also CheckpointTopic or DeadLetterTopic: use a topic of its own`,
		}, `kafkasink: the Encoder writes this truncate of public.t with a null Kafka key (RecordShape.NullKey), and topic "c" is compacted (cleanup.policy), ` +
			"which refuses records without a key; route the table to a topic that is not compacted"},
		{"with Explainer", explainedFramer{}, []string{
			"KeyFormat is text, but the Encoder writes every record key itself (AllKeysEncoder.EncodesAllKeys: option 1 is on): set KeyFormat to KeyJSON (-key-format json), or turn option 1 off",
			`the topic of the records the Encoder writes around events (Framer.FrameTopic: option 2 is on) "kafkasink.checkpoints" is also CheckpointTopic or DeadLetterTopic: use a topic of its own`,
		}, `kafkasink: the Encoder writes this truncate of public.t with a null Kafka key (RecordShape.NullKey: option 3 is on), and topic "c" is compacted (cleanup.policy), ` +
			"which refuses records without a key; turn option 3 off, or route the table to a topic that is not compacted"},
	} {
		cfg := Config{Brokers: []string{"localhost:9092"}, SinkID: "s", Encoder: c.enc}.withDefaults()
		var ce *ConfigError
		if err := cfg.validate(); !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a *ConfigError", c.name, err)
		}
		if got := strings.Join(ce.Problems, "|"); got != strings.Join(c.want, "|") {
			t.Errorf("%s: problems\n%q\nwant\n%q", c.name, ce.Problems, c.want)
		}
		if got := shapedNullKeyOnCompactedTopic(c.enc, truncate, "c").Error(); got != c.nullKey {
			t.Errorf("%s: null key on a compacted topic:\n%s\nwant\n%s", c.name, got, c.nullKey)
		}
	}
}
