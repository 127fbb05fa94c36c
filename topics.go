package kafkasink

import (
	"github.com/kafkasink/kafkasink/internal/tablename"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/kafkasink/kafkasink/internal/topicroute"
)

// problems returns the configuration problems of t.
func (t *Topics) problems() []string {
	p := topicroute.Problems(t.Routes, t.Shared, t.Template, t.Prefix)
	return append(p, t.creation().Problems()...)
}

// creation is how the sink makes sure of the topics it writes events to.
func (t *Topics) creation() topicadmin.Settings {
	return topicadmin.Settings{MustExist: t.MustExist, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor, Configs: t.Configs, Missing: ErrTopicMissing}
}

// newRouter returns the router of a validated cfg: it names each table's
// topic and key columns, and claims the topic for the table.
func newRouter(cfg *Config) *topicroute.Router {
	// validate refused any problem of the keys.
	routes, _ := tablename.Keyed("Topics.Routes", cfg.Topics.Routes)
	keyColumns, _ := tablename.Keyed("KeyColumns", cfg.KeyColumns)
	t := &cfg.Topics
	r := topicroute.New(topicroute.Settings{Route: t.Route, Routes: routes, Template: t.Template, Prefix: t.Prefix, Shared: t.Shared, KeyColumns: keyColumns})
	r.Reserve(cfg.CheckpointTopic, "Config.CheckpointTopic")
	if cfg.DeadLetterTopic != "" {
		r.Reserve(cfg.DeadLetterTopic, "Config.DeadLetterTopic")
	}
	if t := frameTopic(cfg.Encoder); t != "" {
		r.Reserve(t, "Encoder's transaction topic (Framer)")
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
