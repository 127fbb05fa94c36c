// Package outbox emits events for Kafka inside an application's own
// PostgreSQL transaction, with no outbox table: Emit writes the message
// into the write-ahead log with pg_logical_emit_message, and the
// kafkasink pipeline (pgcdc's Run with Config.Outbox set, or the program
// with -outbox-topics) delivers it at the transaction's commit, exactly once,
// in commit order, in the same Kafka transaction as the transaction's
// row changes. A transaction that rolls back leaves no message.
//
//	tx, _ := conn.Begin(ctx)
//	tx.Exec(ctx, "UPDATE orders SET state = 'paid' WHERE id = $1", id)
//	outbox.Emit(ctx, tx, outbox.Message{Topic: "orders.events", Key: []byte(id), Value: event})
//	tx.Commit(ctx)
//
// # Format
//
// The message's content is a versioned JSON document (Version), so that
// any language, or SQL alone, can emit it; docs/outbox.md specifies it.
// Marshal and Unmarshal write and read it.
//
// # Bad input
//
// Emit refuses, before writing anything, a message with no topic or a
// topic Kafka would refuse, a key, header name or header value that is not
// text (valid UTF-8 without NUL bytes: binary keys are for the caller to
// encode as hex or base64), a header name starting with "kafkasink.", and
// one larger than Emitter.MaxBytes. Each error is a *MessageError naming
// the field and the fix. Whether the pipeline may write to the topic is
// its allow-list: a message for a topic outside it is dead-lettered, not
// refused here, since only the pipeline knows it.
//
// # Cost
//
// pg_logical_emit_message writes one WAL record and nothing else: no
// table, no index, no row to delete or vacuum later. It needs wal_level
// logical.
package outbox
