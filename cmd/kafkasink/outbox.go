package main

import (
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink/outbox"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// outboxOptions are the flags of the outbox: the messages applications
// emit with package outbox (docs/outbox.md).
type outboxOptions struct {
	topics, prefix string
	maxBytes       int
	// routerTables and routerProperties are Debezium's EventRouter for
	// outbox tables (pgcdc.Config.EventRouter).
	routerTables, routerProperties string
}

// defineFlags defines the outbox's flags.
func (o *outboxOptions) defineFlags(f flagDefiner) {
	f.str(&o.topics, "outbox-topics", "KAFKASINK_OUTBOX_TOPICS", "", "deliver outbox messages (pg_logical_emit_message from package outbox, docs/outbox.md) to these topics only: comma-separated names, "+
		`or prefixes ending in "*" ("*" alone: any topic); a message for another topic is dead-lettered (-dead-letter-topic). Empty: outbox messages are ignored`)
	f.str(&o.prefix, "outbox-prefix", "KAFKASINK_OUTBOX_PREFIX", outbox.DefaultPrefix, "the logical decoding message prefix of outbox messages, as the applications emit them")
	f.str(&o.routerTables, "event-router-tables", "KAFKASINK_EVENT_ROUTER_TABLES", "", "outbox tables (schema.table, comma-separated) whose inserted rows are routed as Debezium's outbox EventRouter routes them "+
		"(to outbox.event.<aggregatetype>, keyed by aggregateid, the payload as the value, the id as a header); empty: none")
	f.str(&o.routerProperties, "event-router", "KAFKASINK_EVENT_ROUTER", "", "Debezium EventRouter properties for -event-router-tables, comma-separated name=value "+
		"(route.by.field, route.topic.regex, route.topic.replacement, table.field.event.id, .key, .payload, table.fields.additional.placement as column:header:alias "+
		"separated by ';', table.expand.json.payload, route.tombstone.on.empty.payload, debezium.op.invalid.behavior)")
	f.num(&o.maxBytes, "outbox-max-bytes", "KAFKASINK_OUTBOX_MAX_BYTES", 0, "largest key, value and headers of an outbox message together, in bytes; a larger one is dead-lettered (0: 1000000)")
}

// set sets c's Outbox and EventRouter from the flags, and returns what is
// wrong with them.
func (o *outboxOptions) set(c *pgcdc.Config) []string {
	var problems, more []string
	c.Outbox, problems = o.config()
	c.EventRouter, more = o.eventRouter()
	return append(problems, more...)
}

// eventRouter returns pgcdc's Config.EventRouter, nil when
// -event-router-tables is empty, and what is wrong with the flags.
func (o *outboxOptions) eventRouter() (*pgcdc.EventRouter, []string) {
	if o.routerTables == "" {
		if o.routerProperties != "" {
			return nil, []string{"-event-router applies to the outbox tables of -event-router-tables: set it"}
		}
		return nil, nil
	}
	er := &pgcdc.EventRouter{Tables: splitNames(o.routerTables), Properties: map[string]string{}}
	var problems []string
	for _, p := range splitList(o.routerProperties) {
		name, value, ok := strings.Cut(p, "=")
		if !ok {
			problems = append(problems, fmt.Sprintf("-event-router entry %q: want name=value, such as route.by.field=aggregatetype", p))
			continue
		}
		// Placements are separated by ';' here, as ',' separates the
		// properties.
		er.Properties[strings.TrimSpace(name)] = strings.ReplaceAll(strings.TrimSpace(value), ";", ",")
	}
	return er, problems
}

// config returns pgcdc's Config.Outbox, nil when -outbox-topics is empty,
// and what is wrong with the flags.
func (o *outboxOptions) config() (*pgcdc.Outbox, []string) {
	if o.topics == "" {
		if o.prefix != outbox.DefaultPrefix || o.maxBytes != 0 {
			return nil, []string{"-outbox-prefix and -outbox-max-bytes apply to outbox messages, which only -outbox-topics turns on: set it to the topics they may go to"}
		}
		return nil, nil
	}
	return &pgcdc.Outbox{Prefix: o.prefix, Topics: splitList(o.topics), MaxBytes: o.maxBytes}, nil
}
