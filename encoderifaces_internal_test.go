package kafkasink

import (
	"errors"
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
