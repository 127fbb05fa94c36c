package kafkasink

import (
	"strconv"

	"github.com/kafkasink/kafkasink/internal/jsonw"
)

// This file is DebeziumEncoder's provide.transaction.metadata: the
// transaction block of each change event and the BEGIN and END records
// on the transaction topic, as Debezium 3.6.1's PostgreSQL connector
// writes them (testdata/debezium/txmeta-*.jsonl). Debezium names a
// transaction "<txId>:<LSN>" with the LSN of what it was processing when
// it wrote the name: the event's own LSN in the block, the first event's
// in BEGIN, the end of the commit record in END.

// The Kafka Connect schemas of the transaction records, as JsonConverter
// writes them with schemas.enable=true.
const (
	debeziumTxnKeySchema   = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey","version":1}`
	debeziumTxnValueSchema = `{"type":"struct","fields":[{"type":"string","optional":false,"field":"status"},{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":true,"field":"event_count"},{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,"field":"data_collection"},{"type":"int64","optional":false,"field":"event_count"}],"optional":true,"name":"event.collection","version":1},"optional":true,"field":"data_collections"},{"type":"int64","optional":false,"field":"ts_ms"}],"optional":false,"name":"io.debezium.connector.common.TransactionMetadataValue","version":1}`
)

var _ Framer = DebeziumEncoder{}

// FrameTopic implements Framer: TransactionTopic, or Debezium's default
// "<Name>.transaction", with ProvideTransactionMetadata; "" without.
func (d DebeziumEncoder) FrameTopic() string {
	switch {
	case !d.ProvideTransactionMetadata:
		return ""
	case d.TransactionTopic != "":
		return d.TransactionTopic
	}
	return d.name() + ".transaction"
}

// name is source.name: Name, or "kafkasink" when empty.
func (d DebeziumEncoder) name() string {
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
func (d DebeziumEncoder) AppendFrame(dst []byte, e *Event, after bool) ([]byte, int) {
	start := len(dst)
	lsn := debeziumLSN(e)
	if after {
		lsn = e.Txn.End.CommitEnd
	}
	if d.SchemasEnable {
		dst = append(dst, `{"schema":`+debeziumTxnKeySchema+`,"payload":`...)
	}
	dst = append(dst, `{"id":`...)
	dst = appendTxnID(dst, e.XID, lsn)
	dst = append(dst, '}')
	if d.SchemasEnable {
		dst = append(dst, '}')
	}
	keyLen := len(dst) - start

	if d.SchemasEnable {
		dst = append(dst, `{"schema":`+debeziumTxnValueSchema+`,"payload":`...)
	}
	if after {
		dst = append(dst, `{"status":"END","id":`...)
	} else {
		dst = append(dst, `{"status":"BEGIN","id":`...)
	}
	dst = appendTxnID(dst, e.XID, lsn)
	if after {
		end := e.Txn.End
		dst = append(dst, `,"event_count":`...)
		dst = strconv.AppendInt(dst, int64(end.Events), 10)
		dst = append(dst, `,"data_collections":[`...)
		var small [8]int
		for i, ti := range javaHashMapOrder(end.Tables, small[:0]) {
			t := end.Tables[ti]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"data_collection":`...)
			// "schema.table" as one JSON string, without joining
			// the names first: the schema's string reopened, the
			// table's without its opening quote.
			dst = jsonw.AppendString(dst, t.Schema)
			dst = append(dst[:len(dst)-1], '.')
			n := len(dst)
			dst = jsonw.AppendString(dst, t.Table)
			dst = append(dst[:n], dst[n+1:]...)
			dst = append(dst, `,"event_count":`...)
			dst = strconv.AppendInt(dst, int64(t.Events), 10)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	} else {
		dst = append(dst, `,"event_count":null,"data_collections":null`...)
	}
	dst = append(dst, `,"ts_ms":`...)
	var ms int64
	if !e.Commit.IsZero() {
		ms = e.Commit.UnixMilli()
	}
	dst = strconv.AppendInt(dst, ms, 10)
	dst = append(dst, '}')
	if d.SchemasEnable {
		dst = append(dst, '}')
	}
	return dst, keyLen
}

// appendTxnBlock appends the envelope's transaction field: with
// ProvideTransactionMetadata, for a change whose source places it in its
// transaction (e.Txn.Order), {"id","total_order","data_collection_order"};
// null otherwise, snapshot rows included, as Debezium writes them.
func (d DebeziumEncoder) appendTxnBlock(dst []byte, e *Event, lsn LSN) []byte {
	if !d.ProvideTransactionMetadata || e.Op == OpRead || e.Txn.Order == 0 {
		return append(dst, "null"...)
	}
	dst = append(dst, `{"id":`...)
	dst = appendTxnID(dst, e.XID, lsn)
	dst = append(dst, `,"total_order":`...)
	dst = strconv.AppendInt(dst, int64(e.Txn.Order), 10)
	dst = append(dst, `,"data_collection_order":`...)
	dst = strconv.AppendInt(dst, int64(e.Txn.TableOrder), 10)
	return append(dst, '}')
}

// appendTxnID appends Debezium's transaction id "<txId>:<LSN>" as a JSON
// string.
func appendTxnID(dst []byte, xid uint32, lsn LSN) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendUint(dst, uint64(xid), 10)
	dst = append(dst, ':')
	dst = strconv.AppendUint(dst, uint64(lsn), 10)
	return append(dst, '"')
}

// debeziumLSN is source.lsn of a change: its own LSN, or its commit LSN
// when it has none.
func debeziumLSN(e *Event) LSN {
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
func javaHashMapOrder(tables []TableEvents, order []int) []int {
	n := len(tables)
	for i := range n {
		order = append(order, i)
	}
	if n < 2 {
		return order
	}
	hash := func(t TableEvents) uint32 {
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
