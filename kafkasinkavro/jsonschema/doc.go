// Package jsonschema writes change events as JSON in the Confluent wire
// format, with a JSON Schema per table version in a Schema Registry
// (schemaType JSON: Confluent's, or Apicurio Registry's /apis/ccompat/v7),
// for consumers such as Confluent's KafkaJsonSchemaDeserializer and Kafka
// Connect's JsonSchemaConverter. It shares its registry code with
// kafkasinkavro.
//
// # Records
//
// Every key and value is the Confluent wire format: a zero byte, the
// schema's id in four bytes (big-endian), and the JSON document. The value
// is the change event exactly as kafkasink.JSONEncoder writes it (see
// there for its fields and the form of each column value), and the key the
// sink's KeyJSON object of the key columns. A truncate, and an event of a
// table without key columns, is keyed as the sink keys it without this
// encoder (kafkasink.AppendKey), with no key schema.
//
// # Subjects
//
// Config.Subjects chooses the subjects as Confluent's serializers' subject
// name strategies do, which take a JSON Schema's record name from its
// title:
//
//	TopicName         <topic>-value and <topic>-key, the default; the
//	                  schemas are titled "<topic> change event" and
//	                  "<topic> key"
//	RecordName        the titles, [Namespace.]<schema>.<table>.Envelope
//	                  and [Namespace.]<schema>.<table>.Key
//	TopicRecordName   <topic>-<title>, titled as with RecordName
//
// Under TopicName the tables of one topic are versions of its subjects,
// which the compatibility level must allow: under BACKWARD, tables of
// other columns cannot share a topic. Under RecordName and TopicRecordName
// each table has subjects of its own.
//
// # Reading
//
// Decoder reads the records back: it checks the wire format and that the
// schema of the record's id is a JSON Schema, and returns the JSON, for
// kafkasinktest.ReadCommittedWith and other readers of JSONEncoder's JSON.
//
// # Schemas
//
// The value schema (draft-07) describes the envelope, with the row images
// before and after as the objects of the table's columns, a property per
// column, each optional (an unchanged TOAST value, and a delete's column
// outside the replica identity, is left out of the row), in a closed
// content model (additionalProperties false). A column declared NOT NULL
// has its type; every other is also null.
//
//	smallint, integer, bigint, oid   integer
//	real, double precision           number, or the strings NaN, Infinity
//	                                 and -Infinity
//	boolean                          boolean
//	bytea                            string, contentEncoding base64
//	arrays                           array of the element's type, null or
//	                                 an array of the next dimension
//	composites                       object
//	everything else                  string (numeric as its digits, dates,
//	                                 times and timestamps as text, json and
//	                                 jsonb documents as their text, ...)
//
// The key schema is the object of the key columns, each required.
//
// # Schema evolution
//
// As with kafkasinkavro, a table version's schemas are registered inside
// the Write, before its records are produced, and the registry's
// compatibility level decides. Under BACKWARD a closed content model
// allows a new column when it is nullable, and refuses a column that
// changes its JSON type (integer to string) or is dropped: a reader of the
// new schema could not read the old records. A refused schema stops the
// sink with a fatal *kafkasink.PrepareError naming the table, the subject,
// the registry's message, the compatibility level and the columns that
// changed; dropping a column needs the subject's level relaxed (FORWARD or
// NONE) or the table routed to a new topic. Schemas are cached by table
// version, so the steady state makes no registry call.
package jsonschema
