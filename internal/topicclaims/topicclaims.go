// Package topicclaims remembers which table each topic carries, so that
// two tables reach one topic only on purpose: with the same keys,
// compaction and upsert consumers would merge their rows. Derived names
// collide easily ("a.b".c and a."b.c" are both <prefix>.a.b.c; a template
// "{schema}_{table}" makes a_b_c of a_b.c and a.b_c). Tables may share a
// topic when each has a Topics.Routes entry naming it, or when the topic
// is in Topics.Shared. The sink's own topics (checkpoint, dead letters,
// an Encoder's frames) belong to it and no table may route to them.
package topicclaims

import (
	"fmt"
	"strings"
)

// Kind says which setting of kafkasink.Topics named a table's topic.
type Kind string

const (
	ByRoute    Kind = "Topics.Route"
	ByRoutes   Kind = "Topics.Routes"
	ByTemplate Kind = "Topics.Template"
	ByPrefix   Kind = "Topics.Prefix"
)

// Claims holds the first user of each topic. A claim lasts for the sink's
// life; tables first seen by different runs of the sink cannot be
// compared. Not safe for concurrent use.
type Claims struct {
	shared map[string]bool  // Topics.Shared
	claims map[string]claim // by collisionName
}

// claim is the first user of a topic.
type claim struct {
	topic string
	owner string // the table, or the Config field of a sink's topic
	kind  Kind   // how the table was routed; "" for a sink's topic
}

// New returns the claims of a sink whose Topics.Shared is shared.
func New(shared []string) *Claims {
	c := &Claims{shared: make(map[string]bool), claims: make(map[string]claim)}
	for _, t := range shared {
		c.shared[t] = true
	}
	return c
}

// Reserve claims topic for the sink itself; owner names its setting.
func (c *Claims) Reserve(topic, owner string) {
	c.claims[collisionName(topic)] = claim{topic: topic, owner: owner}
}

// Claim records that table (routed by kind) writes to topic, or returns
// the problem, naming the fix, when the topic belongs to another table or
// to the sink.
func (c *Claims) Claim(topic, table string, kind Kind) string {
	prev, ok := c.claims[collisionName(topic)]
	switch {
	case !ok:
		c.claims[collisionName(topic)] = claim{topic: topic, owner: table, kind: kind}
		return ""
	case prev.kind == "":
		return fmt.Sprintf("table %s routes to topic %q (by %s), which is the sink's %s: route the table elsewhere with a Topics.Routes entry",
			table, topic, kind, prev.owner)
	case prev.topic != topic:
		return fmt.Sprintf("table %s routes to topic %q (by %s) and table %s to %q (by %s): Kafka does not tell '.' and '_' apart in topic names' metrics and refuses to create both; route one of them elsewhere with a Topics.Routes entry",
			table, topic, kind, prev.owner, prev.topic, prev.kind)
	case prev.owner == table, c.shared[topic], prev.kind == ByRoutes && kind == ByRoutes:
		return ""
	}
	return fmt.Sprintf("tables %s (by %s) and %s (by %s) both route to topic %q, where their records would mix under the same keys: route one of them elsewhere with a Topics.Routes entry, or, if they are to share the topic, list it in Topics.Shared or give both tables a Topics.Routes entry naming it",
		prev.owner, prev.kind, table, kind, topic)
}

// collisionName is the name under which Kafka tells topics apart in its
// metrics, where '.' and '_' are the same character: a broker refuses to
// create a topic whose collision name an existing topic has.
func collisionName(topic string) string {
	return strings.ReplaceAll(topic, ".", "_")
}
