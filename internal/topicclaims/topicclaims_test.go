package topicclaims

import (
	"strings"
	"testing"
)

// TestClaim: a topic is its first table's; another table may reach it
// only when it is shared or both reach it by Routes entries; a sink's
// topic and a name that differs only in '.' and '_' are refused, naming
// the fix.
func TestClaim(t *testing.T) {
	t.Parallel()
	type claim struct {
		topic, table string
		kind         Kind
	}
	cases := []struct {
		name   string
		first  claim
		second claim
		want   string // a part of the problem; "" when the second claim succeeds
	}{
		{"same table again", claim{"t", "public.a", ByPrefix}, claim{"t", "public.a", ByRoute}, ""},
		{"two tables by prefix", claim{"t", "public.a", ByPrefix}, claim{"t", "public.b", ByPrefix}, "both route to topic \"t\""},
		{"two tables by Routes", claim{"t", "public.a", ByRoutes}, claim{"t", "public.b", ByRoutes}, ""},
		{"Routes and prefix", claim{"t", "public.a", ByRoutes}, claim{"t", "public.b", ByPrefix}, "list it in Topics.Shared"},
		{"shared", claim{"s", "public.a", ByTemplate}, claim{"s", "public.b", ByPrefix}, ""},
		{"collision name", claim{"a.b", "public.a", ByRoutes}, claim{"a_b", "public.b", ByRoutes}, "does not tell '.' and '_' apart"},
		{"sink's topic", claim{"other", "public.a", ByPrefix}, claim{"ck", "public.b", ByRoutes}, "which is the sink's Config.CheckpointTopic"},
		{"sink's topic by collision name", claim{"other", "public.a", ByPrefix}, claim{"c_k2", "public.b", ByRoutes}, "which is the sink's Config.CheckpointTopic"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := New([]string{"s"})
			c.Reserve("ck", "Config.CheckpointTopic")
			c.Reserve("c.k2", "Config.CheckpointTopic")
			if p := c.Claim(tc.first.topic, tc.first.table, tc.first.kind); p != "" {
				t.Fatalf("first claim: %s", p)
			}
			p := c.Claim(tc.second.topic, tc.second.table, tc.second.kind)
			switch {
			case tc.want == "" && p != "":
				t.Errorf("second claim refused: %s", p)
			case tc.want != "" && !strings.Contains(p, tc.want):
				t.Errorf("second claim: %q, want it to contain %q", p, tc.want)
			}
		})
	}
}
