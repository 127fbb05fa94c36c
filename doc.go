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
// The README's Guarantees and docs/ (records.md, configuration.md,
// operations.md) in the repository describe the product; this
// documentation is the API's contract.
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
// # Checkpointing
//
// Each sink keeps its checkpoint in a compacted topic (Config.CheckpointTopic),
// keyed by Config.SinkID: the position of the last delivered event and the
// batch's source cursor. At start-up, New initialises the producer id, which
// fences any older instance with the same transactional id and makes the
// broker finish its open transaction; then it reads the checkpoint partition
// with read_committed up to its high watermark. Checkpoint returns the result,
// so the source knows where to resume, and Write skips every event at or
// below it.
//
// In ExactlyOnce mode each Write is one transaction (or several, for batches
// over Config.MaxTransactionRecords or MaxTransactionBytes, each with its own
// checkpoint): the records, then the checkpoint record, then the commit. A
// commit whose outcome is unknown leaves the checkpoint unverified until it
// is read back; nothing is planned, skipped or committed against it. Only
// New claims the transactional id afresh (or a sink with Config.Guard, when
// the guard consents), so an older instance never fences a newer one. The
// README's "Crash windows" says what each crash does. In the other modes a
// crash between the records and the checkpoint redelivers at most the
// events since the last checkpoint.
//
// # Records
//
// Config.Topics routes each table's events to a topic, Config.KeyColumns
// and KeyFormat make the key, PartitionFor partitions by it as the Java
// producer does, Config.Encoder writes the value, Config.Headers and
// Config.Annotations add headers, and Config.DeadLetterTopic receives
// rejected events; each field's documentation has its rules.
//
// # Errors
//
// Errors fall into three classes, tested with IsRetryable, IsFatal and
// IsRejected, which see through wrapping: retryable (write the same batch
// again), fatal (stop the pipeline) and rejected (events that cannot be
// delivered: they fail the batch, or go to Config.DeadLetterTopic in the
// same transaction). An error caused by the caller's own context ending
// is in none. Nothing is dropped silently.
//
// # Concurrency
//
// A Sink's Write is not safe for concurrent use: a second concurrent Write
// returns ErrConcurrentWrite. Checkpoint and Close are safe from any
// goroutine. Encoders and hooks must be safe for concurrent use.
package kafkasink
