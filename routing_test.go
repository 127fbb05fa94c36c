package kafkasink_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestTwoTablesOneTopic routes two tables to one topic by every kind of
// route. Unless the sharing is explicit, the second table's Write fails
// with a fatal error naming both tables, and the topic holds the first
// table's events only.
func TestTwoTablesOneTopic(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	type table struct{ schema, name string }
	tests := []struct {
		name   string
		topics func(p string) kafkasink.Topics // p: a prefix unique to the case
		a, b   table
		topic  string   // where a goes, with %s for p
		shared bool     // b may join a in topic
		inErr  []string // when not shared
	}{
		{
			name:   "prefix, dots in names",
			topics: func(p string) kafkasink.Topics { return kafkasink.Topics{Prefix: p} },
			a:      table{"a.b", "c"}, b: table{"a", "b.c"},
			topic: "%s.a.b.c",
			inErr: []string{`"a.b".c (by Topics.Prefix)`, `a."b.c" (by Topics.Prefix)`, "Topics.Routes", "Topics.Shared"},
		},
		{
			name:   "template, underscores",
			topics: func(p string) kafkasink.Topics { return kafkasink.Topics{Template: p + ".{schema}_{table}"} },
			a:      table{"a_b", "c"}, b: table{"a", "b_c"},
			topic: "%s.a_b_c",
			inErr: []string{"a_b.c (by Topics.Template)", "a.b_c (by Topics.Template)"},
		},
		{
			name: "route function",
			topics: func(p string) kafkasink.Topics {
				return kafkasink.Topics{Route: func(s, t string) (string, error) { return p + "." + s + "." + t, nil }}
			},
			a: table{"a.b", "c"}, b: table{"a", "b.c"},
			topic: "%s.a.b.c",
			inErr: []string{`"a.b".c (by Topics.Route)`, `a."b.c" (by Topics.Route)`},
		},
		{
			name: "explicit route onto a derived name",
			topics: func(p string) kafkasink.Topics {
				return kafkasink.Topics{Prefix: p, Routes: map[string]string{"a.x": p + ".a.y"}}
			},
			a: table{"a", "x"}, b: table{"a", "y"},
			topic: "%s.a.y",
			inErr: []string{"a.x (by Topics.Routes)", "a.y (by Topics.Prefix)"},
		},
		{
			name:   "names differing in dot and underscore",
			topics: func(p string) kafkasink.Topics { return kafkasink.Topics{Prefix: p} },
			a:      table{"a", "b_c"}, b: table{"a", "b.c"},
			topic: "%s.a.b_c",
			inErr: []string{`table a."b.c" routes to topic`, "table a.b_c to", "'.' and '_'"},
		},
		{
			name: "both explicit routes share",
			topics: func(p string) kafkasink.Topics {
				return kafkasink.Topics{Prefix: p, Routes: map[string]string{`"a.b".c`: p + ".both", `a."b.c"`: p + ".both"}}
			},
			a: table{"a.b", "c"}, b: table{"a", "b.c"},
			topic:  "%s.both",
			shared: true,
		},
		{
			name: "shared topic of a route function",
			topics: func(p string) kafkasink.Topics {
				return kafkasink.Topics{Route: func(string, string) (string, error) { return p + ".all", nil }, Shared: []string{p + ".all"}}
			},
			a: table{"s1", "orders"}, b: table{"s2", "orders"},
			topic:  "%s.all",
			shared: true,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := fmt.Sprintf("collide%d", i)
			topic := fmt.Sprintf(tt.topic, p)
			s := newSink(t, brokers, p, func(c *kafkasink.Config) { c.Topics = tt.topics(p) })
			a := sinktest.Inserts(tt.a.schema, tt.a.name, 100, 1, 2)
			b := sinktest.Inserts(tt.b.schema, tt.b.name, 200, 1, 2)
			write(t, s, a)
			err := tryWrite(t, s, kafkasink.Batch{Events: b})
			want := a
			if tt.shared {
				if err != nil {
					t.Fatalf("Write of %s.%s: %v", tt.b.schema, tt.b.name, err)
				}
				want = append(a, b...)
			} else {
				var ce *kafkasink.ConfigError
				if !errors.As(err, &ce) || !kafkasink.IsFatal(err) {
					t.Fatalf("Write of %s.%s: %v, want a fatal *ConfigError", tt.b.schema, tt.b.name, err)
				}
				for _, w := range append(tt.inErr, topic) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				if got := s.Checkpoint().Position; got != a[1].Position {
					t.Errorf("checkpoint %s, want %s: the refused batch must not move it", got, a[1].Position)
				}
			}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), want)
		})
	}
}

// TestRouteToSinkTopicRefused routes a table to the checkpoint topic and to
// the dead-letter topic: fatal, and nothing reaches either topic.
func TestRouteToSinkTopicRefused(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	for _, field := range []string{"CheckpointTopic", "DeadLetterTopic"} {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			id := "route-to-" + strings.ToLower(field)
			ckpt, dlq := id+".checkpoints", id+".dead"
			target := map[string]string{"CheckpointTopic": ckpt, "DeadLetterTopic": dlq}[field]
			s := newSink(t, brokers, id, func(c *kafkasink.Config) {
				c.CheckpointTopic, c.DeadLetterTopic = ckpt, dlq
				c.Topics.Routes = map[string]string{"public.orders": target}
			})
			events := sinktest.Inserts("public", "orders", 100, 1, 2)
			err := tryWrite(t, s, kafkasink.Batch{Events: events})
			if !kafkasink.IsFatal(err) || !strings.Contains(err.Error(), "Config."+field) || !strings.Contains(err.Error(), "public.orders") {
				t.Fatalf("Write: %v, want a fatal error naming Config.%s and public.orders", err, field)
			}
			for _, r := range sinktest.ReadCommitted(t, brokers, ckpt, dlq) {
				if sinktest.Header(r, kafkasink.HeaderID) != "" {
					t.Errorf("event record %s in %s", sinktest.Header(r, kafkasink.HeaderID), r.Topic)
				}
			}
		})
	}
}

// TestRoutesKeysAreTableNames refuses Topics.Routes keys that name no one
// table; the keys that do are used by TestTwoTablesOneTopic.
func TestRoutesKeysAreTableNames(t *testing.T) {
	t.Parallel()
	for key, inErr := range map[string]string{
		"a.b.c":  `quote the part that contains a dot, such as a."b.c" or "a.b".c`,
		"orders": "no schema",
		`"a.b`:   "unterminated double quote",
	} {
		cfg := validConfig()
		cfg.Topics.Routes = map[string]string{key: "t"}
		checkProblems(t, configError(t, cfg).Problems, [][]string{{"Topics.Routes key", inErr}})
	}
}

func TestTableNameRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range [][2]string{{"public", "orders"}, {"a.b", "c"}, {"a", "b.c"}, {`say "hi"`, " x "}, {"Mixed", "Case"}} {
		name := kafkasink.TableName(tc[0], tc[1])
		s, tb, err := kafkasink.ParseTableName(name)
		if err != nil || s != tc[0] || tb != tc[1] {
			t.Errorf("ParseTableName(TableName(%q, %q) = %q) = %q, %q, %v", tc[0], tc[1], name, s, tb, err)
		}
	}
}

// TestKeyColumnsQuotedTableNames keys one of two tables whose names
// differ only in where the dot is, naming it quoted in Config.KeyColumns;
// an unquoted a.b.c is refused as ambiguous.
func TestKeyColumnsQuotedTableNames(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	cfg.KeyColumns = map[string][]string{"a.b.c": {"name"}}
	checkProblems(t, configError(t, cfg).Problems, [][]string{{"KeyColumns key", "a.b.c", `quote the part that contains a dot`}})

	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "quoted-keys", func(c *kafkasink.Config) {
		c.Topics.Routes = map[string]string{`"a.b".c`: "quoted-keys.one", `a."b.c"`: "quoted-keys.two"}
		c.KeyColumns = map[string][]string{`"a.b".c`: {"name"}}
	})
	one := sinktest.Inserts("a.b", "c", 100, 1, 1)
	two := sinktest.Inserts("a", "b.c", 200, 1, 1)
	write(t, s, append(one, two...))
	for topic, want := range map[string]string{"quoted-keys.one": "row-1", "quoted-keys.two": "1"} {
		recs := sinktest.ReadCommitted(t, brokers, topic)
		if len(recs) != 1 || string(recs[0].Key) != want {
			t.Errorf("%s: %d records, first key %q, want one keyed %q", topic, len(recs), firstKey(recs), want)
		}
	}
}

func firstKey(recs []*kgo.Record) string {
	if len(recs) == 0 {
		return ""
	}
	return string(recs[0].Key)
}
