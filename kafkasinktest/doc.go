// Package kafkasinktest is a test kit for services that embed kafkasink,
// as net/http/httptest is for HTTP handlers: an in-process fake Kafka
// cluster set up the way the sink needs it, faults a test asks for by
// name, a read_committed reader that decodes what the library's encoders
// write, assertions with readable diffs, and a Recorder that stands in for
// a sink where no Kafka is wanted.
//
// # Cluster and faults
//
// NewCluster starts franz-go's kfake with transactions, three brokers and
// fencing that answers a stale producer epoch as Kafka does; it listens
// on loopback only and closes with the test. Its faults need no knowledge
// of the Kafka protocol: LoseCommitAnswer (the commit applies, its answer
// is lost), FailProduce (one partition refuses records), RestartBroker,
// MoveCoordinator, HoldTransaction (another producer's transaction stays
// open on a partition), SlowResponses and SlowCommits. Each documents what
// the sink does about it; Fault.Hits tells whether it fired.
//
// # Reading and asserting
//
// ReadCommitted returns what a read_committed consumer sees of given
// topics, each record decoded into a Record (topic, partition, key, op,
// position, row) whichever of the library's encoders wrote it;
// ReadCommittedWith reads topics of other encoders (kafkasinkavro's Avro)
// through a Transcode function that turns their records into JSON first.
// AssertExactlyOnce checks every event of a source is there once and in
// order per key; AssertCheckpoint checks the checkpoint stored in Kafka.
// Failures list what is missing, duplicated, unexpected or out of order,
// with positions.
//
// ReadCommittedRaw returns the records undecoded, for topics no Transcode
// reads, and Header finds a record's headers (HeaderID, HeaderOp).
// DiffTrees compares two decoded trees (JSON or Avro values) and reports
// each difference by its path. Inserts makes the events a test writes.
//
// # Against real services
//
// Env and RealBrokers read where a real Kafka, PostgreSQL or Schema
// Registry is from environment variables the test names, and skip the
// test, naming what is missing, where they are unset. UniqueName names a
// test's topics and sink so that runs against a long-lived broker do not
// collide, and DeleteTopics removes them afterwards. LogBuffer collects
// what a sink logs while the test reads it. Package pgtest has the
// PostgreSQL side (replication slots, extensions, the row of every
// type), and package rawrecord the records a hand-written pipeline makes,
// which benchmarks measure the sink against.
//
// # Without Kafka
//
// Recorder stands in for the sink: it has its Write, Checkpoint and Close
// and satisfies pgcdc.Sink, so pgcdc.Run and a service's own source can
// write to it; FailWrite makes the n-th Write fail retryably
// (ErrRetryable) or fatally (ErrFatal), and AssertEvents checks what it
// received.
//
// The helpers that can fail a test take its testing.TB; every helper is
// safe under -race and t.Parallel: each test gets a cluster of its own.
package kafkasinktest
