// Package pgoutput decodes PostgreSQL's pgoutput logical replication
// messages (protocol versions 1 and 2, streamed in-progress transactions
// included) into kafkasink.Events: the wire layout, the relation and type
// descriptions, the conversion of column values and the spool of streamed
// transactions.
//
// Its Decoder is the one pgcdc.Run (Run, in this package's
// documentation) uses, built the same way: Run sets
// nothing a user cannot set through DecoderConfig, and asks the database
// what pgoutput does not say through DecoderConfig.Catalog. A Decoder fed
// the same messages with the same DecoderConfig and a Catalog answering as
// Run's yields the events Run writes. pgcdc's documentation ("Decoding",
// "Values") describes the events in full; pgcdc re-exports this package's
// types under the same names.
//
// Error messages keep the "pgcdc:" prefix they had before the package was
// split out of pgcdc, so that logs and alerts matching them still match.
package pgoutput

// DefaultSpoolMaxBytes is DecoderConfig.SpoolMaxBytes's default.
const DefaultSpoolMaxBytes = 16 << 30
