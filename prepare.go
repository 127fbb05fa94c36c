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
// will encode and, for each, the topic it is routed to: topics[i] is the
// topic of events[i], "" when the event is unroutable (it is then
// rejected). A Topics.Route function must give an event's table the same
// topic throughout one Write. Encode and EncodeKey then find what Prepare
// made ready; an event Prepare was not given is never encoded.
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
	Prepare(ctx context.Context, events []Event, topics []string) error
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

// prepare gives the Encoder's Preparer the events and their topics.
func (s *Sink) prepare(ctx context.Context, pr Preparer, events []Event) error {
	if len(events) == 0 {
		return nil
	}
	topics := make([]string, len(events))
	for i := range events {
		if rt := s.routeOf(&events[i]); rt.err == nil && rt.collision == nil {
			topics[i] = rt.topic
		}
	}
	return pr.Prepare(ctx, events, topics)
}

// appendEncodedKey appends e's key as the Encoder's KeyEncoder writes it,
// or as AppendKey does for the records it leaves to the sink (see
// KeyEncoder).
func appendEncodedKey(dst []byte, ke KeyEncoder, e *Event, columns []string, format KeyFormat) ([]byte, error) {
	if len(columns) == 0 {
		columns = e.Key
	}
	if len(columns) == 0 || e.Op == OpTruncate {
		return AppendKey(dst, e, columns, format)
	}
	row := e.Image()
	for _, name := range columns {
		if c, ok := row.Get(name); !ok || c.Unchanged {
			return nil, missingKeyError(e, name, ok)
		}
	}
	return ke.EncodeKey(dst, e, columns)
}
