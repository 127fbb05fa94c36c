// Package kafkasinkavro writes change events as Avro in the Confluent wire
// format, with their schemas in a Schema Registry (Confluent's, or one with
// its API: Apicurio Registry's /apis/ccompat/v7, Karapace, Redpanda), for
// consumers such as Confluent's KafkaAvroDeserializer, Kafka Connect's
// AvroConverter and Materialize.
//
// It is a module of its own, so that programs that do not write Avro do not
// depend on the registry client (franz-go's pkg/sr). Its package
// jsonschema writes the same events as JSON with JSON Schemas in the
// registry, through the same registry code.
//
//	reg, err := sr.NewClient(sr.URLs("http://registry:8081"))
//	...
//	enc, err := kafkasinkavro.New(kafkasinkavro.Config{Registry: reg})
//	...
//	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: "shop", Encoder: enc})
//
// # Records
//
// Every key and value is the Confluent wire format: a zero byte, the
// schema's id in four bytes (big-endian), and the Avro binary encoding of
// the record. Config.Subjects chooses the subjects the schemas are
// registered under, as Confluent's subject name strategies do:
//
//	TopicName        <topic>-value and <topic>-key (the default), the records
//	                 <topic>.Envelope and <topic>.Key, the topic's
//	                 dot-separated parts made Avro names
//	RecordName       the records' full names, <ns>.Envelope and <ns>.Key,
//	                 where <ns> is [Config.Namespace.]<schema>.<table>
//	TopicRecordName  <topic>-<ns>.Envelope and <topic>-<ns>.Key, the
//	                 records named as under RecordName
//
// Under TopicName, tables that share a topic (see kafkasink.Topics) share
// its subjects: their schemas are versions of one subject, which the
// registry's compatibility level must allow, and under BACKWARD two tables
// with different columns cannot share a topic. RecordName and
// TopicRecordName give each table subjects of its own, which is what they
// are for. Under RecordName a table's subjects are the same whatever its
// topic, and the same in every database whose table has its schema and
// name: give each database's pipeline its own Config.Namespace (Debezium
// puts its topic.prefix there) when they share a registry.
//
// The value is the change event, with the fields of kafkasink.JSONEncoder
// in the same order (see there for their meaning), as the record
// <namespace>.Envelope:
//
//	id               string
//	op               string: insert, update, delete, truncate or read
//	schema, table    string
//	lsn, commit_lsn  long
//	index, xid       long
//	commit_time      null or long timestamp-micros
//	key              array of string: the key columns' names
//	before, after    null or the record Value: the row, a field per column
//	unchanged        array of string: unchanged TOAST columns, empty when none
//	truncate         null or the record Truncate {cascade, restart_identity}:
//	                 a truncate's options; null for every other op
//	backfill_run_id  null or string: the snapshot run of a read
//
// kafkasink.Config.Annotations go in headers only (AnnotateHeaders): no
// schema of this module, jsonschema's and the Debezium encoder's
// included, has a field for them, and kafkasink.New refuses them in the
// value with its encoders.
//
// The key is the record <namespace>.Key of the key columns (the table's
// Config.KeyColumns, else its primary key or replica identity). A
// truncate, and an event of a table without key columns, is keyed as the
// sink keys it without this encoder (kafkasink.AppendKey), with no key
// schema.
//
// # Columns
//
// Each column is a field of Value, named after it with every character
// other than a letter, a digit or '_' made '_' (and a '_' before a leading
// digit); the field's doc names the column when the two differ. A column
// declared NOT NULL (or in the primary key) has its type; every other is
// the union of null and its type, with default null. Domains are written as
// their base types.
//
//	boolean                   boolean
//	smallint, integer         int
//	bigint, oid               long
//	real                      float
//	double precision          double (NaN and infinities included)
//	numeric(p,s)              bytes, logicalType decimal, precision p, scale s
//	numeric                   string: its digits (or NaN, Infinity); without
//	                          a declared scale it has no Avro decimal; so do
//	                          PostgreSQL 15's negative scales and scales
//	                          above the precision
//	uuid                      string, logicalType uuid
//	bytea                     bytes
//	date                      int, logicalType date: days since 1970-01-01
//	time                      long, logicalType time-micros
//	timestamp                 long, logicalType local-timestamp-micros
//	timestamptz               long, logicalType timestamp-micros
//	arrays                    array of the union of null, the element's type
//	                          and an array of the next dimension, to
//	                          PostgreSQL's 6 dimensions (a column's values
//	                          may have any number of dimensions)
//	everything else           string: the value's text (text, varchar, char,
//	                          json and jsonb documents, enums, timetz,
//	                          interval, inet, ranges, ...), a composite as a
//	                          JSON object
//
// The dates and timestamps infinity and -infinity are the largest and
// smallest values of their Avro types (2147483647 and -2147483648 days;
// the largest and smallest long). A numeric NaN or infinity in a numeric(p,s)
// column has no Avro decimal: the event is rejected (kafkasink.RejectedError,
// or the dead-letter topic), as is any value its column's type cannot hold.
//
// A column an image has no value for is null in a nullable field, and its
// type's zero value (0, false, "", empty bytes or array, the decimal 0) in
// a NOT NULL one: the columns of an unchanged TOAST value, which the
// envelope's unchanged list names, and a delete's columns outside the
// replica identity, which PostgreSQL does not send.
//
// # Schema evolution
//
// PostgreSQL sends a new Relation when a table changes (a column added,
// dropped or retyped), and pgcdc gives its events a new Event.Relation.
// Write hands the batch to Prepare before anything of it is produced
// (kafkasink.Preparer), which registers the new table version's schemas;
// so the first record of a new version carries its new id, and a crash
// between the registration and the commit leaves at most a schema version
// that no record uses. The registry's compatibility level decides whether
// a change is allowed: under BACKWARD, Confluent's default, a new column
// must be nullable (a NOT NULL column has no default in the schema) and no
// column may change its type. A refused schema stops the sink with a fatal
// *kafkasink.PrepareError that names the table, the subject, the registry's
// message, the compatibility level and the columns that changed; a
// registry that answers 5xx, or not at all, is a retryable one. Schemas
// are cached by table version, so the steady state makes no registry call.
//
// # Reading records back
//
// A Decoder turns the records back into JSON, fetching each schema from
// the registry by the id in the record: a value into the change event
// kafkasink.JSONEncoder writes for the same event, byte for byte (but
// where Avro cannot say what it says: see Decoder), a key into the
// sink's KeyJSON object. Its Transcode gives kafkasinktest's
// ReadCommittedWith Avro topics to read, so that AssertExactlyOnce checks
// them as it checks JSON ones:
//
//	dec := kafkasinkavro.NewDecoder(reg)
//	got := kafkasinktest.ReadCommittedWith(t, brokers, dec.Transcode, topic)
//	kafkasinktest.AssertExactlyOnce(t, got, events)
//
// # Debezium's envelope
//
// NewDebezium makes a DebeziumEncoder, which writes Debezium's PostgreSQL
// envelope instead, as Debezium with Kafka Connect's AvroConverter
// (connect.meta.data on, its default) writes it, for Debezium and
// Materialize consumers reading Avro from a registry:
//
//	enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: reg}, debezium.Encoder{Name: "shop"})
//	...
//	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: "shop", Encoder: enc, Topics: kafkasink.Topics{Prefix: "shop"}})
//
// The content is debezium.Encoder's with SchemasEnable, under its
// options (see there): each record's Kafka Connect schema becomes its Avro
// schema as AvroData makes it, and its payload the Avro record. So the
// value is the record <Name>.<schema>.<table>.Envelope (before and after
// the table's <Name>.<schema>.<table>.Value, source the record
// io.debezium.connector.postgresql.Source, transaction the record
// event.block, op, ts_ms, ts_us and ts_ns), the key the record
// <Name>.<schema>.<table>.Key of the key columns, every Connect schema's
// name, version, doc, parameters and default in the properties
// connect.name, connect.version, connect.doc, connect.parameters and
// connect.default, int8 and int16 as int with connect.type, an optional
// field the union ["null", T] with default null (or [T, "null"] with its
// default, when the Connect schema declares one), Connect's Decimal the
// logical type decimal (precision 64 unless connect.decimal.precision
// says), and Debezium's semantic types (io.debezium.time.MicroTimestamp,
// io.debezium.data.VariableScaleDecimal, io.debezium.data.Json, ...) their
// Connect types with those properties. Name is Debezium's topic.prefix:
// give the sink the same Topics.Prefix for Debezium's topic names. The
// record shape is DebeziumEncoder's (RecordShaper: a tombstone after each
// delete, no truncate by default, Debezium's headers, the other key of a
// key change in them as Debezium's JSON payload, {"id":2}, whatever
// Config.KeyFormat); a table without key columns is written with a null
// key, as Debezium writes it, with pgcdc.Config.KeylessTables; a
// truncate, when written (SkippedOperations "none"), is keyed as the sink
// keys it (its event id in Config.KeyFormat, no schema), and with
// MatchDebeziumLosses with a null key, as Debezium's. With
// ProvideTransactionMetadata the BEGIN and END records (Debezium's
// TransactionMetadataKey and TransactionMetadataValue) are Avro too, under
// the subjects <TransactionTopic>-key and -value.
//
// testdata/debezium/avro*-records.jsonl hold what real Debezium 3.6.1
// with Apicurio Registry's AvroConverter (a port of Confluent's AvroData)
// wrote for the conformance workload, with Debezium's defaults and six
// other configurations (every value of decimal.handling.mode,
// time.precision.mode, interval.handling.mode and binary.handling.mode,
// skipped.operations none, provide.transaction.metadata);
// TestDebeziumAvroConformance finds
// the same schemas, records and headers, but for debezium.Encoder's
// deliberate deviations and a truncate's event-id key (listed with their
// reasons in testdata/debezium/deviations-avro*.txt), and none at all with
// MatchDebeziumLosses. A decoded value:
//
//	{"before": null, "after": {"id": 1, "name": "uno", "n": 10},
//	 "source": {"version": "3.6.1.Final", "connector": "postgresql", "name": "dbz",
//	  "ts_ms": 1796107980607, "snapshot": "false", "db": "kafkasink",
//	  "sequence": "[\"5571416048\",\"5571424528\"]", "ts_us": 1796107980607793,
//	  "ts_ns": 1796107980607793000, "schema": "dbzconf", "table": "ident_default",
//	  "txId": 143178, "lsn": 5571424528, "xmin": null, "origin": null, "origin_lsn": null},
//	 "transaction": null, "op": "u",
//	 "ts_ms": 1796107981508, "ts_us": 1796107981508516, "ts_ns": 1796107981508516526}
//
// An unchanged TOAST value (a change under REPLICA IDENTITY DEFAULT that
// does not carry it) is Debezium's placeholder (UnavailableValuePlaceholder)
// in the column's own form, as debezium.Encoder writes it: the
// string, the bytes of a bytea, a list for text, varchar, char, json,
// jsonb, bytea, integer, bigint, date and uuid arrays. In an array of
// another type, where Debezium has no placeholder of the array's form and
// the root writes the string, the event is rejected (kafkasink.EncodeError
// naming the column and REPLICA IDENTITY FULL).
//
// Each event is written by the root encoder straight into the record in
// Avro (debezium.Encoder.AppendAvro): the rules that write its
// JSON write the Avro too, following the Connect schema the Avro schema is
// made from, without allocating (BenchmarkDebeziumEncode,
// TestDebeziumEncodeAllocs). Schema evolution
// and registry errors are the Encoder's (see above; a refused schema's
// columns are described in Connect types, "changed "n" from int32 to
// string"). Of the subject strategies (Config.Subjects), RecordName
// registers under Debezium's record names (<Name>.<schema>.<table>.Envelope
// and .Key) and TopicRecordName under <topic>-<record name>;
// Config.Namespace is refused, as Debezium names its records itself.
//
// # Performance
//
// Records are appended straight into the sink's buffer in Avro's binary
// encoding, as kafkasink.JSONEncoder appends JSON: a steady-state event
// costs no allocation (BenchmarkEncode). The DebeziumEncoder (NewDebezium)
// costs more per event, for Debezium's value forms and envelope, about as
// much as debezium.Encoder's JSON: BenchmarkDebeziumEncode
// compares both with JSONEncoder on a 10-column update.
package kafkasinkavro
