package topicroute

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink/internal/topicclaims"
)

// TestRoute: Route wins over Routes, Routes over Template, Template over
// Prefix; each answer says which setting named the topic, and a name
// Kafka refuses, or Route's error, is an error naming the table.
func TestRoute(t *testing.T) {
	t.Parallel()
	byFunc := func(schema, table string) (string, error) {
		if table == "bad" {
			return "", errors.New("no topic for it")
		}
		return "fn." + table, nil
	}
	routes := map[[2]string]string{{"public", "a"}: "routed.a"}
	for _, tc := range []struct {
		name          string
		s             Settings
		schema, table string
		topic         string
		kind          topicclaims.Kind
		err           string // a part of the error; "" for none
	}{
		{"route function", Settings{Route: byFunc, Routes: routes, Prefix: "p"}, "public", "a", "fn.a", topicclaims.ByRoute, ""},
		{"route function fails", Settings{Route: byFunc}, "public", "bad", "", topicclaims.ByRoute, "Topics.Route for public.bad: no topic for it"},
		{"routes", Settings{Routes: routes, Template: "t.{table}"}, "public", "a", "routed.a", topicclaims.ByRoutes, ""},
		{"template", Settings{Routes: routes, Template: "cdc_{schema}_{table}"}, "public", "b", "cdc_public_b", topicclaims.ByTemplate, ""},
		{"prefix", Settings{Prefix: "kafkasink"}, "public", "b", "kafkasink.public.b", topicclaims.ByPrefix, ""},
		{"invalid name", Settings{Prefix: "kafkasink"}, "public", "a b", "", topicclaims.ByPrefix, `topic for public."a b" by Topics.Prefix`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			topic, kind, err := New(tc.s).Route(tc.schema, tc.table)
			if topic != tc.topic || kind != tc.kind || (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Route(%q, %q) = %q, %q, %v; want %q, %q, an error saying %q", tc.schema, tc.table, topic, kind, err, tc.topic, tc.kind, tc.err)
			}
		})
	}
}

// TestClaim: a table may claim its topic again; another table reaching
// it, or a table reaching a reserved topic, is a problem naming both.
func TestClaim(t *testing.T) {
	t.Parallel()
	r := New(Settings{Prefix: "p", KeyColumns: map[[2]string][]string{{"public", "a"}: {"id"}}})
	r.Reserve("ck", "Config.CheckpointTopic")
	if p := r.Claim("p.t", "public", "a", topicclaims.ByPrefix); p != "" {
		t.Fatalf("first claim: %s", p)
	}
	if p := r.Claim("p.t", "public", "a", topicclaims.ByPrefix); p != "" {
		t.Errorf("the same table again: %s", p)
	}
	if p := r.Claim("p.t", "public", "b", topicclaims.ByPrefix); !strings.Contains(p, "public.a") || !strings.Contains(p, "public.b") {
		t.Errorf("another table: %q, want a problem naming both tables", p)
	}
	if p := r.Claim("ck", "public", "c", topicclaims.ByRoutes); !strings.Contains(p, "Config.CheckpointTopic") {
		t.Errorf("a reserved topic: %q, want a problem naming Config.CheckpointTopic", p)
	}
	if cols := r.KeyColumns("public", "a"); len(cols) != 1 || cols[0] != "id" {
		t.Errorf("KeyColumns(public, a) = %q, want [id]", cols)
	}
	if cols := r.KeyColumns("public", "b"); cols != nil {
		t.Errorf("KeyColumns(public, b) = %q, want none", cols)
	}
}

// TestProblems: Template and Prefix together, an unknown placeholder, and
// invalid topic names or table names in Routes and Shared are each named.
func TestProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		routes           map[string]string
		shared           []string
		template, prefix string
		want             string // a part of the problems; "" for none
	}{
		{"valid", map[string]string{"public.a": "a"}, []string{"s"}, "cdc.{schema}.{table}", "", ""},
		{"both", nil, nil, "t.{table}", "p", "Topics.Template and Topics.Prefix are both set"},
		{"unknown placeholder", nil, nil, "t.{db}.{table}", "", `Topics.Template "t.{db}.{table}" has an unknown placeholder`},
		{"invalid template", nil, nil, "t {table}", "", "Topics.Template: "},
		{"invalid prefix", nil, nil, "", "a/b", "Topics.Prefix: "},
		{"invalid route topic", map[string]string{"public.a": "a b"}, nil, "", "p", `Topics.Routes["public.a"]: `},
		{"route without schema", map[string]string{"a": "a"}, nil, "", "p", "Topics.Routes"},
		{"invalid shared topic", nil, []string{".."}, "", "p", "Topics.Shared: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := strings.Join(Problems(tc.routes, tc.shared, tc.template, tc.prefix), "; ")
			if tc.want == "" && p != "" || !strings.Contains(p, tc.want) {
				t.Errorf("Problems = %q, want %q", p, tc.want)
			}
		})
	}
}
