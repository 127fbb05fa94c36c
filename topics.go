package kafkasink

import (
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink/internal/tablename"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/kafkasink/kafkasink/internal/topicclaims"
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
	_, routeProblems := tablename.Keyed("Topics.Routes", t.Routes)
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

// route names the topic of an event's table and checks the name.
func (r *router) route(schema, table string) (string, topicclaims.Kind, error) {
	t := r.topics
	var (
		topic string
		kind  topicclaims.Kind
	)
	switch {
	case t.Route != nil:
		kind = topicclaims.ByRoute
		var err error
		if topic, err = t.Route(schema, table); err != nil {
			return "", kind, fmt.Errorf("Topics.Route for %s: %w", TableName(schema, table), err)
		}
	case r.routes[[2]string{schema, table}] != "":
		topic, kind = r.routes[[2]string{schema, table}], topicclaims.ByRoutes
	case t.Template != "":
		topic, kind = strings.NewReplacer("{schema}", schema, "{table}", table).Replace(t.Template), topicclaims.ByTemplate
	default:
		topic, kind = t.Prefix+"."+schema+"."+table, topicclaims.ByPrefix
	}
	if err := topicadmin.ValidateName(topic); err != nil {
		return "", kind, fmt.Errorf("topic for %s by %s: %w; route the table explicitly with a Topics.Routes entry", TableName(schema, table), kind, err)
	}
	return topic, kind, nil
}

// router names the topic of each table, and claims each topic for the
// first table that reaches it (see internal/topicclaims), so that another
// table reaching it fails Write with a fatal *ConfigError unless Topics
// says the topic is shared.
//
// Not safe for concurrent use: the sink uses it under its write guard.
type router struct {
	topics     *Topics
	routes     map[[2]string]string   // Topics.Routes by table
	keyColumns map[[2]string][]string // Config.KeyColumns by table
	claims     *topicclaims.Claims
	// granted holds the (topic, schema, table) claims that succeeded, so
	// that a Topics.Route answer seen before costs one lookup.
	granted map[[3]string]bool
}

// newRouter returns the router of a validated cfg.
func newRouter(cfg *Config) *router {
	// validate refused any problem of the keys.
	routes, _ := tablename.Keyed("Topics.Routes", cfg.Topics.Routes)
	keyColumns, _ := tablename.Keyed("KeyColumns", cfg.KeyColumns)
	r := &router{topics: &cfg.Topics, routes: routes, keyColumns: keyColumns,
		claims: topicclaims.New(cfg.Topics.Shared), granted: make(map[[3]string]bool)}
	r.claims.Reserve(cfg.CheckpointTopic, "Config.CheckpointTopic")
	if cfg.DeadLetterTopic != "" {
		r.claims.Reserve(cfg.DeadLetterTopic, "Config.DeadLetterTopic")
	}
	if t := frameTopic(cfg.Encoder); t != "" {
		r.claims.Reserve(t, "Encoder's transaction topic (Framer)")
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

// claim records that table (routed by kind) writes to topic, or returns a
// *ConfigError, fatal, when the topic belongs to another table or to the
// sink.
func (r *router) claim(topic, schema, table string, kind topicclaims.Kind) error {
	if r.granted[[3]string{topic, schema, table}] {
		return nil
	}
	if problem := r.claims.Claim(topic, TableName(schema, table), kind); problem != "" {
		return &ConfigError{Problems: []string{problem}}
	}
	r.granted[[3]string{topic, schema, table}] = true
	return nil
}
