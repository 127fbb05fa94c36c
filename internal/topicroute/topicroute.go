// Package topicroute is where a table's events go, by the settings of
// kafkasink.Topics and Config.KeyColumns: it names each table's topic,
// checks the name, and claims each topic for the first table that
// reaches it (see internal/topicclaims), so that another table reaching
// it is refused unless Topics says the topic is shared.
package topicroute

import (
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink/internal/tablename"
	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/kafkasink/kafkasink/internal/topicclaims"
)

// Settings are the fields of kafkasink.Topics that name topics, with its
// Routes and Config.KeyColumns keyed by table (tablename.Keyed); see
// there for what each means.
type Settings struct {
	Route            func(schema, table string) (string, error)
	Routes           map[[2]string]string
	Template, Prefix string
	Shared           []string
	KeyColumns       map[[2]string][]string
}

// Problems returns the problems of kafkasink.Topics' naming settings:
// each Routes entry's table name and topic, each Shared topic, and
// Template and Prefix, which name a table's topic when nothing routes it:
// only one may be set, the Template knows {schema} and {table} only, and
// what either makes around the names must be a valid topic name.
func Problems(routes map[string]string, shared []string, template, prefix string) []string {
	var p []string
	if template != "" && prefix != "" {
		p = append(p, "Topics.Template and Topics.Prefix are both set: use one")
	}
	if template != "" {
		probe := strings.NewReplacer("{schema}", "s", "{table}", "t").Replace(template)
		if strings.ContainsAny(probe, "{}") {
			p = append(p, fmt.Sprintf("Topics.Template %q has an unknown placeholder: only {schema} and {table} are allowed", template))
		} else if err := topicadmin.ValidateName(probe); err != nil {
			p = append(p, "Topics.Template: "+err.Error())
		}
	}
	if prefix != "" {
		if err := topicadmin.ValidateName(prefix); err != nil {
			p = append(p, "Topics.Prefix: "+err.Error())
		}
	}
	for table, topic := range routes {
		if err := topicadmin.ValidateName(topic); err != nil {
			p = append(p, fmt.Sprintf("Topics.Routes[%q]: %v", table, err))
		}
	}
	_, routeProblems := tablename.Keyed("Topics.Routes", routes)
	p = append(p, routeProblems...)
	for _, topic := range shared {
		if err := topicadmin.ValidateName(topic); err != nil {
			p = append(p, fmt.Sprintf("Topics.Shared: %v", err))
		}
	}
	return p
}

// Router names the topic of each table and claims it.
//
// Not safe for concurrent use: the sink uses it under its write guard.
type Router struct {
	s      Settings
	claims *topicclaims.Claims
	// granted holds the (topic, schema, table) claims that succeeded, so
	// that a Topics.Route answer seen before costs one lookup.
	granted map[[3]string]bool
}

// New returns the router of valid settings.
func New(s Settings) *Router {
	return &Router{s: s, claims: topicclaims.New(s.Shared), granted: make(map[[3]string]bool)}
}

// Reserve makes topic the sink's own, named by owner (the Config field
// that names it): no table may route to it.
func (r *Router) Reserve(topic, owner string) { r.claims.Reserve(topic, owner) }

// Route names the topic of an event's table, says which setting named it,
// and checks the name.
func (r *Router) Route(schema, table string) (string, topicclaims.Kind, error) {
	t := &r.s
	var (
		topic string
		kind  topicclaims.Kind
	)
	switch {
	case t.Route != nil:
		kind = topicclaims.ByRoute
		var err error
		if topic, err = t.Route(schema, table); err != nil {
			return "", kind, fmt.Errorf("Topics.Route for %s: %w", tablename.Format(schema, table), err)
		}
	case t.Routes[[2]string{schema, table}] != "":
		topic, kind = t.Routes[[2]string{schema, table}], topicclaims.ByRoutes
	case t.Template != "":
		topic, kind = strings.NewReplacer("{schema}", schema, "{table}", table).Replace(t.Template), topicclaims.ByTemplate
	default:
		topic, kind = t.Prefix+"."+schema+"."+table, topicclaims.ByPrefix
	}
	if err := topicadmin.ValidateName(topic); err != nil {
		return "", kind, fmt.Errorf("topic for %s by %s: %w; route the table explicitly with a Topics.Routes entry", tablename.Format(schema, table), kind, err)
	}
	return topic, kind, nil
}

// Claim records that table (routed by kind) writes to topic, or returns
// the problem, fatal for the sink, when the topic belongs to another
// table or to the sink.
func (r *Router) Claim(topic, schema, table string, kind topicclaims.Kind) (problem string) {
	if r.granted[[3]string{topic, schema, table}] {
		return ""
	}
	if problem := r.claims.Claim(topic, tablename.Format(schema, table), kind); problem != "" {
		return problem
	}
	r.granted[[3]string{topic, schema, table}] = true
	return ""
}

// KeyColumns returns the key columns Config.KeyColumns gives the table;
// nil when it gives none.
func (r *Router) KeyColumns(schema, table string) []string {
	return r.s.KeyColumns[[2]string{schema, table}]
}
