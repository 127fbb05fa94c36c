package kafkasink

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// problems returns the configuration problems of t.
func (t *Topics) problems() []string {
	var p []string
	if t.Template != "" && t.Prefix != "" {
		p = append(p, "Topics.Template and Topics.Prefix are both set: use one")
	}
	if t.Template != "" {
		probe := strings.NewReplacer("{schema}", "s", "{table}", "t").Replace(t.Template)
		if strings.ContainsAny(probe, "{}") {
			p = append(p, fmt.Sprintf("Topics.Template %q has an unknown placeholder: only {schema} and {table} are allowed", t.Template))
		} else if err := topicadmin.ValidateName(probe); err != nil {
			p = append(p, "Topics.Template: "+err.Error())
		}
	}
	if t.Prefix != "" {
		if err := topicadmin.ValidateName(t.Prefix); err != nil {
			p = append(p, "Topics.Prefix: "+err.Error())
		}
	}
	for table, topic := range t.Routes {
		if err := topicadmin.ValidateName(topic); err != nil {
			p = append(p, fmt.Sprintf("Topics.Routes[%q]: %v", table, err))
		}
	}
	_, routeProblems := parseTableKeys("Topics.Routes", t.Routes)
	p = append(p, routeProblems...)
	for _, topic := range t.Shared {
		if err := topicadmin.ValidateName(topic); err != nil {
			p = append(p, fmt.Sprintf("Topics.Shared: %v", err))
		}
	}
	if t.Partitions == 0 || t.Partitions < -1 {
		p = append(p, fmt.Sprintf("Topics.Partitions %d: want a positive count or -1 for the broker's default", t.Partitions))
	}
	if t.ReplicationFactor == 0 || t.ReplicationFactor < -1 {
		p = append(p, fmt.Sprintf("Topics.ReplicationFactor %d: want a positive factor or -1 for the broker's default", t.ReplicationFactor))
	}
	return p
}

// creation is how the sink makes sure of the topics it writes events to.
func (t *Topics) creation() topicadmin.Settings {
	return topicadmin.Settings{MustExist: t.MustExist, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor, Configs: t.Configs, Missing: ErrTopicMissing}
}

// routeKind says which setting of Topics named a table's topic.
type routeKind string

const (
	byRoute    routeKind = "Topics.Route"
	byRoutes   routeKind = "Topics.Routes"
	byTemplate routeKind = "Topics.Template"
	byPrefix   routeKind = "Topics.Prefix"
)

// route names the topic of an event's table and checks the name.
func (r *router) route(schema, table string) (string, routeKind, error) {
	t := r.topics
	var (
		topic string
		kind  routeKind
	)
	switch {
	case t.Route != nil:
		kind = byRoute
		var err error
		if topic, err = t.Route(schema, table); err != nil {
			return "", kind, fmt.Errorf("Topics.Route for %s: %w", TableName(schema, table), err)
		}
	case r.routes[[2]string{schema, table}] != "":
		topic, kind = r.routes[[2]string{schema, table}], byRoutes
	case t.Template != "":
		topic, kind = strings.NewReplacer("{schema}", schema, "{table}", table).Replace(t.Template), byTemplate
	default:
		topic, kind = t.Prefix+"."+schema+"."+table, byPrefix
	}
	if err := topicadmin.ValidateName(topic); err != nil {
		return "", kind, fmt.Errorf("topic for %s by %s: %w; route the table explicitly with a Topics.Routes entry", TableName(schema, table), kind, err)
	}
	return topic, kind, nil
}

// parseTableKeys returns m keyed by table, and the problems of its keys:
// names ParseTableName refuses or that have no schema, and two keys naming
// one table (such as public.a and public."a"). field names m in problems.
func parseTableKeys[V any](field string, m map[string]V) (map[[2]string]V, []string) {
	out := make(map[[2]string]V, len(m))
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		schema, table, err := ParseTableName(name)
		if err == nil && schema == "" {
			err = fmt.Errorf("table name %q has no schema: want schema.table", name)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s key: %v", field, err))
			continue
		}
		k := [2]string{schema, table}
		if _, dup := out[k]; dup {
			problems = append(problems, fmt.Sprintf("%s has two keys for table %s", field, TableName(schema, table)))
		}
		out[k] = m[name]
	}
	return out, problems
}

// router names the topic of each table, and remembers which table each
// topic carries, so that two tables reach one topic only on purpose: with
// the same keys, compaction and upsert consumers would merge their rows.
// Derived names collide easily ("a.b".c and a."b.c" are both
// <prefix>.a.b.c; a template "{schema}_{table}" makes a_b_c of a_b.c and
// a.b_c). Tables may share a
// topic when each has a Topics.Routes entry naming it, or when the topic
// is in Topics.Shared. The checkpoint and dead-letter topics belong to
// the sink and no table may route to them.
//
// A claim lasts for the sink's life; tables first seen by different runs
// of the sink cannot be compared (see Topics).
//
// Not safe for concurrent use: the sink uses it under its write guard.
type router struct {
	topics     *Topics
	routes     map[[2]string]string   // Topics.Routes by table
	keyColumns map[[2]string][]string // Config.KeyColumns by table
	shared     map[string]bool        // Topics.Shared
	claims     map[string]topicClaim  // by collisionName
	// granted holds the (topic, schema, table) claims that succeeded, so
	// that a Topics.Route answer seen before costs one lookup.
	granted map[[3]string]bool
}

// topicClaim is the first user of a topic.
type topicClaim struct {
	topic string
	owner string    // the table (TableName), or the Config field of a sink's topic
	kind  routeKind // how the table was routed; "" for a sink's topic
}

// newRouter returns the router of a validated cfg.
func newRouter(cfg *Config) *router {
	// validate refused any problem of the keys.
	routes, _ := parseTableKeys("Topics.Routes", cfg.Topics.Routes)
	keyColumns, _ := parseTableKeys("KeyColumns", cfg.KeyColumns)
	r := &router{topics: &cfg.Topics, routes: routes, keyColumns: keyColumns, shared: make(map[string]bool),
		claims: make(map[string]topicClaim), granted: make(map[[3]string]bool)}
	for _, t := range cfg.Topics.Shared {
		r.shared[t] = true
	}
	r.claims[collisionName(cfg.CheckpointTopic)] = topicClaim{topic: cfg.CheckpointTopic, owner: "Config.CheckpointTopic"}
	if cfg.DeadLetterTopic != "" {
		r.claims[collisionName(cfg.DeadLetterTopic)] = topicClaim{topic: cfg.DeadLetterTopic, owner: "Config.DeadLetterTopic"}
	}
	if t := frameTopic(cfg.Encoder); t != "" {
		r.claims[collisionName(t)] = topicClaim{topic: t, owner: "Encoder's transaction topic (Framer)"}
	}
	return r
}

// frameTopic is the topic of the records enc writes around events (see
// Framer), "" when it writes none.
func frameTopic(enc Encoder) string {
	if f, ok := enc.(Framer); ok {
		return f.FrameTopic()
	}
	return ""
}

// collisionName is the name under which Kafka tells topics apart in its
// metrics, where '.' and '_' are the same character: a broker refuses to
// create a topic whose collision name an existing topic has.
func collisionName(topic string) string {
	return strings.ReplaceAll(topic, ".", "_")
}

// claim records that table (routed by kind) writes to topic, or returns a
// *ConfigError, fatal, when the topic belongs to another table or to the
// sink.
func (r *router) claim(topic, schema, table string, kind routeKind) error {
	if r.granted[[3]string{topic, schema, table}] {
		return nil
	}
	err := r.check(topic, schema, table, kind)
	if err == nil {
		r.granted[[3]string{topic, schema, table}] = true
	}
	return err
}

// check is claim without the memory of granted claims.
func (r *router) check(topic, schema, table string, kind routeKind) error {
	me := TableName(schema, table)
	prev, ok := r.claims[collisionName(topic)]
	switch {
	case !ok:
		r.claims[collisionName(topic)] = topicClaim{topic: topic, owner: me, kind: kind}
		return nil
	case prev.kind == "":
		return &ConfigError{Problems: []string{fmt.Sprintf("table %s routes to topic %q (by %s), which is the sink's %s: route the table elsewhere with a Topics.Routes entry",
			me, topic, kind, prev.owner)}}
	case prev.topic != topic:
		return &ConfigError{Problems: []string{fmt.Sprintf("table %s routes to topic %q (by %s) and table %s to %q (by %s): Kafka does not tell '.' and '_' apart in topic names' metrics and refuses to create both; route one of them elsewhere with a Topics.Routes entry",
			me, topic, kind, prev.owner, prev.topic, prev.kind)}}
	case prev.owner == me, r.shared[topic], prev.kind == byRoutes && kind == byRoutes:
		return nil
	}
	return &ConfigError{Problems: []string{fmt.Sprintf("tables %s (by %s) and %s (by %s) both route to topic %q, where their records would mix under the same keys: route one of them elsewhere with a Topics.Routes entry, or, if they are to share the topic, list it in Topics.Shared or give both tables a Topics.Routes entry naming it",
		prev.owner, prev.kind, me, kind, topic)}}
}
