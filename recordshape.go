package kafkasink

// RecordShaper is an optional interface of an Encoder that writes an event
// as something other than exactly one record: a tombstone after a delete,
// no record for the operations its format leaves out, headers of its own.
// The sink asks once per event, before encoding it; an Encoder
// without it costs nothing more.
//
// The records an event makes are one unit for the sink: they are in the
// same part of a batch, so with ExactlyOnce in the same Kafka transaction
// (a crash cannot write one without the other), size-checked together
// with the event's record, and dead-lettered as the event (a rejected
// event gets its one dead-letter record and no tombstone). A skipped
// event is intentionally not delivered: the checkpoint moves past it as
// past a written one, and it is counted in BatchInfo.Skipped and reported
// to HookEventsSkipped with SkipInfo.ByEncoder set and logged, never
// dropped silently.
type RecordShaper interface {
	// Shape says how the sink writes e's records.
	Shape(e *Event) RecordShape
	// AppendHeaders appends the encoder's headers of e's records to dst,
	// after the sink's own kafkasink.* headers, with their values
	// appended to arena; it returns both. otherKey is, for either event
	// of a key change (Event.Source.KeyChange set), the record key of the
	// other event as the sink renders keys (Config.KeyFormat); nil
	// otherwise. A Value may be a slice of arena (capped at its end, as
	// later appends must not reach it) or of otherKey. It must not keep
	// arena, otherKey or dst: the sink reuses them for later batches.
	AppendHeaders(dst []Header, arena []byte, e *Event, otherKey []byte) ([]Header, []byte)
}

// Header is a record header a RecordShaper adds.
type Header struct {
	Key   string
	Value []byte
}

// RecordShape is how the sink writes one event.
type RecordShape struct {
	// Skip leaves the event out: no record is written for it (see
	// RecordShaper on how it is counted), except the records
	// RecordBefore and RecordAfter ask for.
	Skip bool
	// Tombstone writes, right after the event's record, a record with the
	// same key, the same headers and a null value, which lets a compacted
	// topic remove the key.
	Tombstone bool
	// NullKey writes the event's record with a null key, in partition 0
	// as the sink writes Event.Keyless events, where the Encoder's format
	// has no key for it (a format that writes a TRUNCATE so). A
	// compacted topic refuses such a record, so there the event is
	// rejected (ReasonNoKey), naming the fix (see Explainer).
	NullKey bool
	// RecordBefore and RecordAfter write a record before the event's
	// records and one after them (after its tombstone) on the topic the
	// Encoder's Framer names, made by its AppendFrame, such as the
	// BEGIN and END of a transaction. They are part of the event (see
	// RecordShaper); a dead-lettered event keeps them around its
	// dead-letter record, and a skipped event still gets them. The
	// Encoder must implement Framer to ask for them.
	RecordBefore, RecordAfter bool
}

// Framer is the interface of a RecordShaper whose shapes ask for records
// around an event (RecordShape.RecordBefore and RecordAfter). The sink
// creates or checks its topic as it does the others (Topics), and no
// table may be routed to it.
type Framer interface {
	// FrameTopic is the topic of the records around events, "" when the
	// Encoder's options ask for none. The sink asks once, in New.
	FrameTopic() string
	// AppendFrame appends the key and then the value of the record
	// before e's records (after false) or after them (after true) to
	// dst, and returns dst and the key's length. The record carries no
	// header; the sink partitions it by its key, as every record.
	AppendFrame(dst []byte, e *Event, after bool) (out []byte, keyLen int)
}
