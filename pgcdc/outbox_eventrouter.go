package pgcdc

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kafkasink/kafkasink"
)

// EventRouter routes the rows of outbox tables as Debezium's outbox
// EventRouter transformation (io.debezium.transforms.outbox.EventRouter)
// does, for applications that already write an outbox table: each
// inserted row becomes a record on the topic its route.by.field column
// names, keyed by its table.field.event.key column, with its
// table.field.event.payload column as the value and its
// table.field.event.id column as the "id" header. Unlike Debezium with
// Kafka Connect, the records are in the same Kafka transaction as the row
// changes of their commit, exactly once.
//
// Keys and values are written as Kafka Connect's JsonConverter with
// schemas.enable=false writes Debezium's: a text key or payload as a JSON
// string (an expanded payload, table.expand.json.payload, as its JSON),
// a number as a JSON number, bytea as a base64 string, NULL as null
// (a null payload is a tombstone). Header values are written as Kafka
// Connect's SimpleHeaderConverter writes them: text as is, numbers in
// decimal. docs/outbox.md lists the deviations.
//
// Deletes and truncates of outbox rows are ignored, as Debezium ignores
// deletes; an update is logged and ignored, or with
// debezium.op.invalid.behavior=fatal stops Run. A row that cannot be
// routed (a column missing, a topic Kafka refuses) is rejected by the
// sink as unroutable and dead-lettered with its payload when the sink has
// a DeadLetterTopic.
type EventRouter struct {
	// Tables are the outbox tables, "schema.table"; required. Their rows
	// are routed, never written to their own topic.
	Tables []string
	// Properties are the transformation's options by Debezium's names
	// (without the "transforms.<name>." prefix); nil or missing ones take
	// Debezium's defaults. Supported: route.by.field (aggregatetype),
	// route.topic.regex ((?<routedByValue>.*)), route.topic.replacement
	// (outbox.event.${routedByValue}), table.field.event.id (id),
	// table.field.event.key (aggregateid), table.field.event.payload
	// (payload), table.fields.additional.placement (none; the "header"
	// placement only: column:header[:alias]), table.expand.json.payload
	// (false), route.tombstone.on.empty.payload (false),
	// debezium.op.invalid.behavior (warn; error, fatal). Any other is
	// refused by name.
	Properties map[string]string
}

// eventRouterDefaults are Debezium 3.6's defaults of the supported
// properties.
var eventRouterDefaults = map[string]string{
	"route.by.field":                    "aggregatetype",
	"route.topic.regex":                 "(?<routedByValue>.*)",
	"route.topic.replacement":           "outbox.event.${routedByValue}",
	"table.field.event.id":              "id",
	"table.field.event.key":             "aggregateid",
	"table.field.event.payload":         "payload",
	"table.fields.additional.placement": "",
	"table.expand.json.payload":         "false",
	"route.tombstone.on.empty.payload":  "false",
	"debezium.op.invalid.behavior":      "warn",
}

// eventRouter is an EventRouter ready to route.
type eventRouter struct {
	tables                 map[[2]string]bool
	routeBy, id, key, body string
	topicRegex             *regexp.Regexp
	replacement            string
	headers                []routerHeader
	expand, tombstoneEmpty bool
	invalid                string
}

// routerHeader is a column placed in a header.
type routerHeader struct{ column, name string }

// prepare checks er and returns it ready, or the problems, in the words
// of Config's fields.
func (er *EventRouter) prepare() (*eventRouter, []string) {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	p := maps.Clone(eventRouterDefaults)
	maps.Copy(p, er.Properties)
	for name := range er.Properties {
		if _, ok := eventRouterDefaults[name]; !ok {
			add("Config.EventRouter.Properties: %q is not supported; supported are %s", name, strings.Join(slices.Sorted(maps.Keys(eventRouterDefaults)), ", "))
		}
	}
	r := &eventRouter{tables: map[[2]string]bool{}, routeBy: p["route.by.field"], id: p["table.field.event.id"],
		key: p["table.field.event.key"], body: p["table.field.event.payload"], replacement: p["route.topic.replacement"], invalid: p["debezium.op.invalid.behavior"]}
	if len(er.Tables) == 0 {
		add("Config.EventRouter.Tables is empty: name the outbox tables")
	}
	for _, t := range er.Tables {
		schema, table, err := splitTable(t)
		if err != nil {
			add("Config.EventRouter.Tables: %v", err)
			continue
		}
		r.tables[[2]string{schema, table}] = true
	}
	var err error
	if r.topicRegex, err = regexp.Compile("^(?:" + p["route.topic.regex"] + ")$"); err != nil {
		add("Config.EventRouter.Properties route.topic.regex: %v", err)
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"table.expand.json.payload", &r.expand}, {"route.tombstone.on.empty.payload", &r.tombstoneEmpty}} {
		if *b.dst, err = strconv.ParseBool(p[b.name]); err != nil {
			add("Config.EventRouter.Properties %s %q: want true or false", b.name, p[b.name])
		}
	}
	if !slices.Contains([]string{"warn", "error", "fatal"}, strings.ToLower(r.invalid)) {
		add("Config.EventRouter.Properties debezium.op.invalid.behavior %q: want warn, error or fatal", r.invalid)
	}
	for _, f := range strings.Split(p["table.fields.additional.placement"], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		parts := strings.Split(f, ":")
		switch {
		case len(parts) < 2 || len(parts) > 3:
			add("Config.EventRouter.Properties table.fields.additional.placement %q: want column:header or column:header:alias", f)
		case !strings.EqualFold(parts[1], "header"):
			add("Config.EventRouter.Properties table.fields.additional.placement %q: placement %q is not supported, only header: "+
				"an envelope would wrap the payload in a Connect struct, a partition would bypass the key's partition", f, parts[1])
		default:
			h := routerHeader{column: parts[0], name: parts[0]}
			if len(parts) == 3 {
				h.name = parts[2]
			}
			r.headers = append(r.headers, h)
		}
	}
	return r, problems
}

// routerAction is what the router does with an event.
type routerAction int

const (
	routerPass   routerAction = iota // not an outbox table's: as it is
	routerRecord                     // routed: the event now carries its record
	routerIgnore                     // a delete, a truncate, or an update under warn or error
	routerFatal                      // an update under debezium.op.invalid.behavior=fatal
)

// route decides what to do with e, giving an inserted outbox row its
// SourceRecord.
func (r *eventRouter) route(e *kafkasink.Event) routerAction {
	if !r.tables[[2]string{e.Schema, e.Table}] {
		return routerPass
	}
	switch e.Op {
	case kafkasink.OpInsert, kafkasink.OpRead:
		e.Record = r.record(e.After)
		return routerRecord
	case kafkasink.OpUpdate:
		if strings.EqualFold(r.invalid, "fatal") {
			return routerFatal
		}
	}
	return routerIgnore
}

// record makes the record of an outbox row.
func (r *eventRouter) record(row kafkasink.Row) *kafkasink.SourceRecord {
	rec := &kafkasink.SourceRecord{}
	refuse := func(format string, args ...any) *kafkasink.SourceRecord {
		if rec.Refused == nil {
			rec.Refused = fmt.Errorf("pgcdc: EventRouter: "+format, args...)
		}
		return rec
	}
	body, ok := row.Get(r.body)
	if !ok {
		return refuse("the outbox row has no payload column %q (table.field.event.payload)", r.body)
	}
	rec.Value = r.value(body.Value)
	routeBy, ok := row.Get(r.routeBy)
	routed, isText := routeBy.Value.(string)
	if !ok || !isText {
		return refuse("the outbox row's route.by.field column %q is missing or not text", r.routeBy)
	}
	rec.Topic = routed
	if m := r.topicRegex.FindStringSubmatchIndex(routed); m != nil {
		rec.Topic = string(r.topicRegex.ExpandString(nil, r.replacement, routed, m))
	}
	if r.key != "" {
		if k, ok := row.Get(r.key); !ok {
			return refuse("the outbox row has no key column %q (table.field.event.key)", r.key)
		} else if k.Value != nil {
			rec.Key = connectJSON(k.Value)
		}
	}
	id, ok := row.Get(r.id)
	if !ok {
		return refuse("the outbox row has no event id column %q (table.field.event.id)", r.id)
	}
	rec.Headers = append(rec.Headers, kafkasink.Header{Key: "id", Value: headerText(id.Value)})
	for _, h := range r.headers {
		c, ok := row.Get(h.column)
		if !ok {
			return refuse("the outbox row has no column %q (table.fields.additional.placement)", h.column)
		}
		rec.Headers = append(rec.Headers, kafkasink.Header{Key: h.name, Value: headerText(c.Value)})
	}
	return rec
}

// value is the record value of a payload: null for NULL (and, with
// route.tombstone.on.empty.payload, blank text), else as JsonConverter
// writes it, an expanded JSON payload as its JSON.
func (r *eventRouter) value(v any) []byte {
	text, isText := payloadText(v)
	switch {
	case v == nil, r.tombstoneEmpty && isText && strings.TrimSpace(text) == "":
		return nil
	case r.expand && isText && (strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[")):
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(text)) == nil {
			return buf.Bytes()
		}
	}
	if isText {
		return connectJSON(text)
	}
	return connectJSON(v)
}

// payloadText is a text or JSON column's text.
func payloadText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.RawMessage:
		return string(x), true
	}
	return "", false
}

// connectJSON writes v as JsonConverter with schemas.enable=false does:
// bytes as base64, exact decimals as their text.
func connectJSON(v any) []byte {
	switch x := v.(type) {
	case []byte:
		v = base64.StdEncoding.EncodeToString(x)
	case kafkasink.Decimal:
		v = string(x)
	case json.RawMessage:
		v = string(x)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return []byte(strconv.Quote(fmt.Sprint(v)))
	}
	return out
}

// headerText writes a header value as SimpleHeaderConverter does: text as
// is, other values in their JSON text.
func headerText(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []byte(x)
	case json.RawMessage:
		return []byte(x)
	}
	return bytes.Trim(connectJSON(v), `"`)
}

// EventRouterError stops Run at an update of an outbox row under
// debezium.op.invalid.behavior=fatal (Config.EventRouter). It is not
// retried: the server would send the same update again.
type EventRouterError struct {
	Table string        // the outbox table, "schema.table"
	LSN   kafkasink.LSN // the update's WAL position
}

func (e *EventRouterError) Error() string {
	return fmt.Sprintf("pgcdc: EventRouter: update of outbox table %s at %s, and debezium.op.invalid.behavior is fatal: "+
		"outbox rows are only inserted; set the behavior to warn to skip updates", e.Table, e.LSN)
}

// routeEvent applies the EventRouter to e: whether e goes on (with its
// record when it is an outbox row), or the error that stops Run.
func (s *session) routeEvent(e *kafkasink.Event) (keep bool, err error) {
	switch s.router.route(e) {
	case routerIgnore:
		if e.Op == kafkasink.OpUpdate {
			level := slog.LevelWarn
			if strings.EqualFold(s.router.invalid, "error") {
				level = slog.LevelError
			}
			s.log.Log(s.ctx, level, "EventRouter: update of an outbox row ignored: outbox rows are only inserted",
				"table", kafkasink.TableName(e.Schema, e.Table), "lsn", e.LSN.String())
		}
		return false, nil
	case routerFatal:
		return false, &EventRouterError{Table: kafkasink.TableName(e.Schema, e.Table), LSN: e.LSN}
	}
	return true, nil
}

// ready is er prepared, nil without er; Config.Validate has refused any
// problem before Run streams.
func (er *EventRouter) ready() *eventRouter {
	if er == nil {
		return nil
	}
	r, _ := er.prepare()
	return r
}
