package kafkasink

import "context"

// Preparer is an optional interface of an Encoder that must do something
// before a batch's records are written: a Schema Registry encoder (the
// kafkasinkavro module's) registers the schemas of each table version the
// batch holds, under subjects named after the topic, and then writes their
// ids into the records.
//
// Write calls Prepare once per batch, after dropping the events its
// checkpoint covers and before it produces any record of the batch (in
// ExactlyOnce mode, before the transaction begins), with the events it
// will encode and where each goes: routes[i] is the route of events[i].
// An event carrying a SourceRecord has the zero route: the sink writes it
// without the Encoder.
// A Topics.Route function must give an event's table the same topic
// throughout one Write. Encode and EncodeKey then find what Prepare made
// ready; an event Prepare was not given is never encoded.
//
// What Prepare does must be idempotent: a Write that fails after it, or a
// crash before the commit, leaves it done without the records (for a
// Schema Registry, at most a schema version no record uses), and the
// retried Write prepares again. An error fails the Write before anything
// is sent; return a *PrepareError to say whether it is retryable.
//
// Prepare is called from Write, never concurrently with itself on one
// sink; an Encoder shared by several sinks must be safe for that.
type Preparer interface {
	Prepare(ctx context.Context, events []Event, routes []EventRoute) error
}

// EventRoute is where the sink writes an event, as Preparer sees it.
type EventRoute struct {
	// Topic is the event's topic; "" when the event is unroutable (it
	// is then rejected).
	Topic string
	// KeyColumns are the columns the sink will give the Encoder's
	// KeyEncoder for the event's key; empty when the sink keys the record
	// itself (see KeyEncoder for both).
	KeyColumns []string
}

// KeyEncoder is an optional interface of an Encoder that writes the record
// keys too, such as a Schema Registry encoder whose keys carry a schema id.
//
// The sink calls EncodeKey for row changes of tables with key columns
// (columns: Config.KeyColumns for the table, else Event.Key), after
// checking that the event's image (After, else Before) holds every one of
// them with a value, as AppendKey requires; it appends e's key to dst and
// returns the extended slice. Every other record is keyed as AppendKey
// does, in Config.KeyFormat: a truncate and an event without key columns
// by its event id, a keyless table's event (Event.Keyless) with a null
// key. A value EncodeKey cannot represent is an *EncodeError, and the
// event is rejected (ReasonUnencodable).
type KeyEncoder interface {
	EncodeKey(dst []byte, e *Event, columns []string) ([]byte, error)
}

// prepare gives the Encoder's Preparer the events and their routes, as
// resolve found them.
func (s *Sink) prepare(ctx context.Context, pr Preparer, events []Event, rt *routing) error {
	if len(events) == 0 {
		return nil
	}
	routes := make([]EventRoute, len(events))
	last := 0
	for i := range events {
		e := &events[i]
		t := rt.of(e, &last)
		if t.err != nil || t.collision != nil || e.Record != nil {
			continue
		}
		routes[i] = EventRoute{Topic: t.topic, KeyColumns: eventKeyColumns(e, t.keyColumns)}
	}
	return pr.Prepare(ctx, events, routes)
}

// eventKeyColumns returns the columns e's key is made of, by AppendKey or
// a KeyEncoder: the configured columns, else e.Key; nil for a truncate or
// when there are none, which AppendKey keys without columns.
func eventKeyColumns(e *Event, columns []string) []string {
	if len(columns) == 0 {
		columns = e.Key
	}
	if len(columns) == 0 || e.Op == OpTruncate {
		return nil
	}
	return columns
}

// appendEncodedKey appends e's key as the Encoder's KeyEncoder writes it,
// or as AppendKey does for the records it leaves to the sink (see
// KeyEncoder).
func appendEncodedKey(dst []byte, ke KeyEncoder, e *Event, configured []string, format KeyFormat) ([]byte, error) {
	columns := eventKeyColumns(e, configured)
	if columns == nil {
		return AppendKey(dst, e, configured, format)
	}
	row := e.Image()
	for _, name := range columns {
		if c, ok := row.Get(name); !ok || c.Unchanged {
			return nil, MissingKeyColumnError(e, name, ok)
		}
	}
	return ke.EncodeKey(dst, e, columns)
}
