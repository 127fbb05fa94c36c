// Package debezium writes Debezium's PostgreSQL connector envelope
// (Debezium 3.6.1, as Kafka Connect's JsonConverter writes it) for a
// kafkasink.Sink: give an Encoder to kafkasink.Config.Encoder, and
// consumers written for Debezium read the sink's topics as they read
// Debezium's.
//
//	sink, err := kafkasink.New(ctx, kafkasink.Config{
//		Brokers: []string{"localhost:9092"},
//		SinkID:  "orders-to-kafka",
//		Encoder: debezium.Encoder{Name: "pg-main"},
//	})
//
// # What it writes
//
// The envelope with its source block, Debezium's value forms for each
// declared column type under the modes Debezium has for them
// (DecimalMode, TimePrecisionMode, IntervalMode, BinaryMode), the
// placeholder of an unchanged TOAST value (PlaceholderIsString), hstore
// as JSON text, declared defaults, the tombstone after a delete and
// Debezium's headers (kafkasink.RecordShaper), and with
// ProvideTransactionMetadata the BEGIN and END records of each
// transaction (kafkasink.Framer). With SchemasEnable every key and value
// carries its Kafka Connect schema, and the encoder writes the record
// keys too (kafkasink.AllKeysEncoder). See Encoder for every deviation
// from Debezium and the option that matches it.
//
// # Other forms of the same records
//
// The kafkasinkavro module writes the same records in Avro with a Schema
// Registry (kafkasinkavro.NewDebezium). It is built on this package's
// exported pieces: the Connect schemas (Encoder.ValueSchema,
// FrameSchemas, ConnectSchema), the Avro binary payloads (AppendAvro,
// AppendAvroKey, AppendAvroFrameKey, AppendAvroFrameValue) and the key's
// JSON payload (AppendKeyPayload).
//
// # Compatibility
//
// The package belongs to the kafkasink module and follows its version:
// its API changes only as the module's does, and a change to what it
// writes for the same event and options is listed in the changelog, as
// the conformance lists under testdata/debezium pin it.
package debezium
