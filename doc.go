// Package kafkasink delivers change-data-capture events into Apache Kafka,
// exactly once by default.
//
// A service builds a Sink with New and calls one method, Write, with each
// batch of row changes it reads from its source (for PostgreSQL, the
// pgcdc package is that source, ready-made). When Write returns nil, every
// event of the batch is durably in Kafka and the sink's checkpoint has moved
// with it; the service may then acknowledge its source.
//
//	sink, err := kafkasink.New(ctx, kafkasink.Config{
//		Brokers: []string{"localhost:9092"},
//		SinkID:  "orders-to-kafka",
//	})
//	...
//	err = sink.Write(ctx, kafkasink.Batch{Events: events})
//
// # Formats
//
// Import the package of the format the records are written in. This
// package writes its own JSON: the change event (JSONEncoder, the
// default) and the row document (UpsertEncoder). Other formats are
// packages of their own that import this one (the README lists them);
// the github.com/kafkasink/kafkasink/kafkasinkavro module writes Avro and
// JSON Schema with a Schema Registry (kafkasinkavro.New). The sink knows
// an Encoder only through Encoder and its optional interfaces
// (KeyEncoder, AllKeysEncoder, Preparer, RecordShaper, Framer, Annotator,
// Validator, ValueSizer, Explainer), which a format of one's own
// implements as those packages do.
//
// # Modes
//
// The Mode in Config selects the guarantee:
//
//	mode                   producer                        in the topic                          checkpoint
//	ExactlyOnce (default)  transactional, one id per sink  each event once, for read_committed   in the same transaction
//	Idempotent             idempotent, acks=all            at least once; duplicates only after  after the batch is
//	                                                        a crash or a failed Write, at most    acknowledged
//	                                                        the events since the last checkpoint
//	Plain                  no idempotence, Config.Acks     at least once with AcksAll; a retry   after the batch
//	                                                        can reorder records
//
// Exactly-once is what a consumer with isolation.level=read_committed sees.
// A transaction is durable when Write returns; the broker writes its commit
// markers just after, so such a consumer may see it moments later, but never
// in part.
// A read_uncommitted consumer (the Java client's default) also sees records
// of aborted transactions.
//
// # Checkpointing and crash windows
//
// Each sink keeps its checkpoint in a compacted topic (Config.CheckpointTopic),
// keyed by Config.SinkID: the position of the last delivered event and the
// batch's source cursor. At start-up, New initialises the producer id, which
// fences any older instance with the same transactional id and makes the
// broker finish its open transaction; then it reads the checkpoint partition
// with read_committed up to its high watermark. Checkpoint returns the result,
// so the source knows where to resume.
//
// In ExactlyOnce mode each Write is one transaction (or several, for batches
// over Config.MaxTransactionRecords or MaxTransactionBytes, each with its own
// checkpoint): the records, then the checkpoint record, then the commit.
//
//   - A crash before the commit: the broker aborts the transaction when the
//     restarted sink initialises its producer id. Nothing of it is visible;
//     the source redelivers the batch and it is written once.
//   - A crash after the commit, before the source was acknowledged: the
//     source redelivers the batch; every event at or below the checkpoint is
//     skipped, so the topic gets nothing new.
//   - A commit whose outcome is unknown (a lost response, a timeout): the
//     checkpoint in memory becomes unverified. The sink aborts whatever of
//     its own may still be open while keeping its producer identity (kgo
//     re-initialises the producer id at its current epoch, KIP-360), reads
//     the checkpoint back, and retries only what it does not cover. Nothing
//     is planned, skipped or committed against an unverified checkpoint.
//   - An older instance never fences a newer one: only New claims the
//     transactional id afresh. The broker answers an older instance's
//     re-initialisation PRODUCER_FENCED, and a checkpoint read back that
//     the instance did not write means another one is writing: ErrFenced.
//   - A commit the broker answered without writing its commit markers to a
//     partition (Kafka 4.4 did so while the partition had no leader): before
//     the next transaction begins, the sink checks that every data partition
//     the last one wrote has its last stable offset past its records, waits
//     up to a second for late markers, and keeps checking a partition still
//     pending before each later transaction. If a later abort took the
//     records, Write stops with ErrCheckpoint naming them; nothing is lost
//     without a word while the sink runs.
//
// In the other modes a crash between the records and the checkpoint
// redelivers at most the events since the last checkpoint.
//
// # Records
//
// Topic: routed per table by Config.Topics: a function, explicit routes, a
// template with {schema} and {table}, or a prefix ("kafkasink.<schema>.<table>"
// by default). Schema and table names go into templates and prefixes
// verbatim; a table whose name makes an invalid topic name is rejected
// (unroutable) until it is routed explicitly. Two tables never share a
// topic by accident: one reaching another's topic is a fatal *ConfigError
// naming both, unless Topics says the topic is shared (see Topics). Topics
// are created on first use unless Topics.MustExist; the sink never lets
// the broker auto-create one.
//
// Key: Config.KeyColumns for the table, else the event's key columns, else
// the event id; in the text form of KeyText or as JSON (KeyJSON), or as
// an AllKeysEncoder writes every key (such as a key with its Kafka
// Connect schema, {"schema","payload"}, which needs KeyJSON). Records are
// partitioned by Kafka's murmur2 of the key, like the Java producer, so other
// producers agree on partitions. An event of a table without a key that
// says so (Event.Keyless) has no key instead of its event id: a null key,
// written to partition 0.
//
// Value: Config.Encoder: JSONEncoder (the change event, default),
// UpsertEncoder (the row document, a tombstone for deletes), or the
// Encoder of a format package. LSNs and other integers that can exceed
// 2^53 are JSON strings in the built-in encoders. NaN and infinite
// floats are the strings "NaN", "Infinity" and "-Infinity"; invalid UTF-8 in
// a string becomes U+FFFD, as encoding/json does.
//
// An Encoder may also write the keys (KeyEncoder) and prepare each batch
// before its records are produced (Preparer): the kafkasinkavro module's
// Avro encoders register each table version's schemas in a Schema Registry
// that way, and write keys and values in the Confluent wire format.
//
// Headers: every record of an event carries kafkasink.id, kafkasink.op,
// kafkasink.table, kafkasink.lsn and kafkasink.commit_lsn, unless
// Config.Headers selects fewer: HeadersMinimal keeps kafkasink.id and
// kafkasink.op (what consumers that remove duplicates, and kafkasinktest,
// read), HeadersNone none (the records then carry only the Encoder's own,
// a RecordShaper's). Dead-lettered records carry all five. The records a
// Framer writes around events (such as a transaction's BEGIN and END, on
// its FrameTopic) carry none.
//
// Annotations: Config.Annotations are static key/values (env=prod) echoed
// in every record of an event, as Config.AnnotationsIn says: an
// "annotations" object in the value (the default; JSONEncoder,
// UpsertEncoder, and any Encoder that is an Annotator), a
// header each after the sink's and the Encoder's (tombstones and dead
// letters included), or both, keys in sorted order.
//
// Dead letters: with Config.DeadLetterTopic, a rejected event's record goes
// there instead, and always carries the event: its key (the event id when
// no key could be made), the Encoder's value (the event as JSONEncoder
// writes it when the Encoder failed or made a tombstone), and the headers
// kafkasink.reason, kafkasink.error, kafkasink.topic and kafkasink.value
// (ValueEncoded, ValueEvent or ValueOmitted). Only a value too large for
// the dead-letter topic itself is left out, never cut short: the record
// keeps its key and headers, kafkasink.value says "omitted", and the sink
// logs an Error. A dead-lettered event keeps the records a Framer writes
// around it, which count it: its transaction is still described whole.
//
// Large values: a record that cannot fit its topic by the lengths of its
// column values alone is rejected before it is encoded, so a huge value
// is not copied into JSON only to be refused.
//
// # Errors
//
// Errors fall into three classes, tested with IsRetryable, IsFatal and
// IsRejected, which see through wrapping:
//
//   - retryable: timeouts, lost connections, leader moves, aborted or
//     timed-out transactions. Write the same batch again.
//   - fatal: ErrFenced, ErrClosed, ErrTopicMissing, ErrInvalidBatch,
//     ErrCheckpoint, ErrUnsafeCheckpointTopic, *ConfigError, authentication,
//     authorisation and TLS failures. Stop the pipeline.
//   - rejected: *RejectedError, events that cannot be delivered (unencodable,
//     unroutable, no key, too large for the topic). They fail the batch, or,
//     with Config.DeadLetterTopic, go to that topic in the same transaction
//     with headers naming the reason. Nothing is dropped silently.
//
// # Concurrency
//
// A Sink's Write is not safe for concurrent use: a second concurrent Write
// returns ErrConcurrentWrite. Checkpoint and Close are safe from any
// goroutine. Encoders and hooks must be safe for concurrent use.
package kafkasink
