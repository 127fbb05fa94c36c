package debezium

import (
	"strconv"

	"github.com/kafkasink/kafkasink"
)

// This file is Encoder's provide.transaction.metadata: the
// transaction block of each change event and the BEGIN and END records
// on the transaction topic, as Debezium 3.6.1's PostgreSQL connector
// writes them (testdata/debezium/txmeta-*.jsonl). Debezium names a
// transaction "<txId>:<LSN>" with the LSN of what it was processing when
// it wrote the name: the event's own LSN in the block, the first event's
// in BEGIN, the end of the commit record in END.

// The Kafka Connect schemas of the transaction records, and their JSON as
// JsonConverter writes them with schemas.enable=true.
var (
	debeziumTxnKeySchema = connectSchema{
		typ:     "struct",
		fields:  []connectField{{"id", plainSchema("string")}},
		name:    "io.debezium.connector.common.TransactionMetadataKey",
		version: 1,
	}
	debeziumTxnValueSchema = connectSchema{
		typ: "struct",
		fields: []connectField{
			{"status", plainSchema("string")},
			{"id", plainSchema("string")},
			{"event_count", optionalSchema(plainSchema("int64"))},
			{"data_collections", connectSchema{typ: "array", optional: true, items: &connectSchema{
				typ:      "struct",
				fields:   []connectField{{"data_collection", plainSchema("string")}, {"event_count", plainSchema("int64")}},
				optional: true,
				name:     "event.collection",
				version:  1,
			}}},
			{"ts_ms", plainSchema("int64")},
		},
		name:    "io.debezium.connector.common.TransactionMetadataValue",
		version: 1,
	}
)

var (
	debeziumTxnKeySchemaJSON   = string(debeziumTxnKeySchema.appendJSON(nil, ""))
	debeziumTxnValueSchemaJSON = string(debeziumTxnValueSchema.appendJSON(nil, ""))
)

var _ kafkasink.Framer = Encoder{}

// FrameTopic implements Framer: TransactionTopic, or Debezium's default
// "<Name>.transaction", with ProvideTransactionMetadata; "" without.
func (d Encoder) FrameTopic() string {
	switch {
	case !d.ProvideTransactionMetadata:
		return ""
	case d.TransactionTopic != "":
		return d.TransactionTopic
	}
	return d.name() + ".transaction"
}

// name is source.name: Name, or "kafkasink" when empty.
func (d Encoder) name() string {
	if d.Name == "" {
		return "kafkasink"
	}
	return d.Name
}

// AppendFrame implements Framer: the BEGIN record before the first event
// of a transaction (after false), the END record after its last. The
// key is {"id":<id>}, the value {"status","id","event_count",
// "data_collections","ts_ms"} with ts_ms the commit time; BEGIN's counts
// are null, END's are those of e.Txn.End. With SchemasEnable both carry
// Debezium's TransactionMetadataKey and TransactionMetadataValue schemas.
func (d Encoder) AppendFrame(dst []byte, e *kafkasink.Event, after bool) ([]byte, int) {
	start := len(dst)
	w := connectWriter{buf: dst}
	if d.SchemasEnable {
		w.buf = append(append(append(w.buf, `{"schema":`...), debeziumTxnKeySchemaJSON...), `,"payload":`...)
	}
	writeFrameKey(&w, e, after)
	if d.SchemasEnable {
		w.buf = append(w.buf, '}')
	}
	keyLen := len(w.buf) - start
	if d.SchemasEnable {
		w.buf = append(append(append(w.buf, `{"schema":`...), debeziumTxnValueSchemaJSON...), `,"payload":`...)
	}
	writeFrameValue(&w, e, after)
	if d.SchemasEnable {
		w.buf = append(w.buf, '}')
	}
	return w.buf, keyLen
}

// AppendAvroFrameKey appends the key of AppendFrame's record in the Avro
// binary encoding of the schema AvroData makes from its Connect schema
// (see AppendAvro), for the kafkasinkavro module.
func (d Encoder) AppendAvroFrameKey(dst []byte, e *kafkasink.Event, after bool) []byte {
	w := avroWriter(dst, &debeziumTxnKeySchema)
	writeFrameKey(&w, e, after)
	return avroFrame(&w)
}

// AppendAvroFrameValue appends the value of AppendFrame's record in Avro,
// as AppendAvroFrameKey its key.
func (d Encoder) AppendAvroFrameValue(dst []byte, e *kafkasink.Event, after bool) []byte {
	w := avroWriter(dst, &debeziumTxnValueSchema)
	writeFrameValue(&w, e, after)
	return avroFrame(&w)
}

// avroFrame returns what w wrote of a transaction record. Its values are
// strings and counts, the types its schema was written for: a failure
// is a bug, not an input to reject.
func avroFrame(w *connectWriter) []byte {
	if err := w.failed(); err != nil {
		panic(err)
	}
	return w.buf
}

// frameLSN is the LSN in the name of e's transaction in its BEGIN (after
// false) or END record.
func frameLSN(e *kafkasink.Event, after bool) kafkasink.LSN {
	if after {
		return e.Txn.End.CommitEnd
	}
	return debeziumLSN(e)
}

// writeFrameKey writes the key of e's transaction's BEGIN or END record.
func writeFrameKey(w *connectWriter, e *kafkasink.Event, after bool) {
	w.beginStruct()
	w.key(`"id":`)
	writeTxnID(w, e.XID, frameLSN(e, after))
	w.endStruct()
}

// writeFrameValue writes the value of e's transaction's BEGIN or END
// record.
func writeFrameValue(w *connectWriter, e *kafkasink.Event, after bool) {
	w.beginStruct()
	w.key(`"status":`)
	if after {
		w.text("END")
	} else {
		w.text("BEGIN")
	}
	w.key(`,"id":`)
	writeTxnID(w, e.XID, frameLSN(e, after))
	w.key(`,"event_count":`)
	if after {
		end := e.Txn.End
		w.int(int64(end.Events))
		w.key(`,"data_collections":`)
		var small [8]int
		order := javaHashMapOrder(end.Tables, small[:0])
		w.beginArray(len(order))
		for i, ti := range order {
			t := end.Tables[ti]
			w.elem(i)
			w.beginStruct()
			w.key(`"data_collection":`)
			w.joined(t.Schema, '.', t.Table)
			w.key(`,"event_count":`)
			w.int(int64(t.Events))
			w.endStruct()
		}
		w.endArray()
	} else {
		w.null()
		w.key(`,"data_collections":`)
		w.null()
	}
	w.key(`,"ts_ms":`)
	var ms int64
	if !e.Commit.IsZero() {
		ms = e.Commit.UnixMilli()
	}
	w.int(ms)
	w.endStruct()
}

// writeTxnBlock writes the envelope's transaction field: with
// ProvideTransactionMetadata, for a change whose source places it in its
// transaction (e.Txn.Order), {"id","total_order","data_collection_order"};
// null otherwise, snapshot rows included, as Debezium writes them.
func (d Encoder) writeTxnBlock(w *connectWriter, e *kafkasink.Event, lsn kafkasink.LSN) {
	if !d.ProvideTransactionMetadata || e.Op == kafkasink.OpRead || e.Txn.Order == 0 {
		w.null()
		return
	}
	w.beginStruct()
	w.key(`"id":`)
	writeTxnID(w, e.XID, lsn)
	w.key(`,"total_order":`)
	w.int(int64(e.Txn.Order))
	w.key(`,"data_collection_order":`)
	w.int(int64(e.Txn.TableOrder))
	w.endStruct()
}

// writeTxnID writes Debezium's transaction id "<txId>:<LSN>".
func writeTxnID(w *connectWriter, xid uint32, lsn kafkasink.LSN) {
	mark := w.beginText()
	w.buf = strconv.AppendUint(w.buf, uint64(xid), 10)
	w.buf = append(w.buf, ':')
	w.buf = strconv.AppendUint(w.buf, uint64(lsn), 10)
	w.endText(mark)
}

// debeziumLSN is source.lsn of a change: its own LSN, or its commit LSN
// when it has none.
func debeziumLSN(e *kafkasink.Event) kafkasink.LSN {
	if e.LSN != 0 {
		return e.LSN
	}
	return e.Position.LSN
}

// javaHashMapOrder appends to order the indexes of tables in the order in
// which Debezium lists them in END's data_collections: that of a
// java.util.HashMap<String, Long> (Debezium's TransactionContext) into
// which their names, "schema.table", were put in the order of tables
// (each table's first event). Such a map iterates its buckets in order,
// each bucket's keys in insertion order; a key's bucket is its
// String.hashCode, spread (h ^ h>>>16), modulo the table size, 16 doubled
// each time the map passes three quarters full, or when a key is put into
// a bucket of 8 while the table is below 64. (A bucket of more than 8
// keys in a table of 64 or more becomes a tree whose order is not
// modelled here: it takes 9 table names that collide.) Checked against Debezium 3.6.1 on
// a transaction of 7 tables.
func javaHashMapOrder(tables []kafkasink.TableEvents, order []int) []int {
	n := len(tables)
	for i := range n {
		order = append(order, i)
	}
	if n < 2 {
		return order
	}
	hash := func(t kafkasink.TableEvents) uint32 {
		h := javaStringHash(javaStringHash(0, t.Schema)*31+'.', t.Table)
		return h ^ h>>16
	}
	size := 16
	if n >= 8 {
		counts := make(map[uint32]int)
		for i, t := range tables {
			b := hash(t) & uint32(size-1)
			if counts[b] >= 8 && size < 64 {
				size *= 2
			}
			if i+1 > size*3/4 {
				size *= 2
			}
			clear(counts)
			for _, u := range tables[:i+1] {
				counts[hash(u)&uint32(size-1)]++
			}
		}
	}
	bucket := func(i int) uint32 { return hash(tables[i]) & uint32(size-1) }
	// Insertion sort: stable, and n is small.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && bucket(order[j-1]) > bucket(order[j]); j-- {
			order[j-1], order[j] = order[j], order[j-1]
		}
	}
	return order
}

// javaStringHash continues Java's String.hashCode h over s, counted in
// UTF-16 code units.
func javaStringHash(h uint32, s string) uint32 {
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = h*31 + uint32(0xD800+r>>10)
			h = h*31 + uint32(0xDC00+r&0x3FF)
			continue
		}
		h = h*31 + uint32(r)
	}
	return h
}
