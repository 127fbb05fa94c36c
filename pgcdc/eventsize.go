package pgcdc

import (
	"encoding/json"
	"time"
	"unsafe"

	"github.com/kafkasink/kafkasink"
)

// This file is what a batch of events costs in memory, for
// Config.BatchMaxBytes: the batch's slice of Events, and what each event
// holds outside it (its rows and their values). What the decoder shares
// between events (schema, table, column and key names, the Relation) is
// not counted: it is held once, whatever the batch.

// Sizes of the structures a batch is made of.
const (
	eventBytes       = int(unsafe.Sizeof(kafkasink.Event{}))
	columnBytes      = int(unsafe.Sizeof(kafkasink.Column{}))
	summaryBytes     = int(unsafe.Sizeof(kafkasink.TxnSummary{}))
	tableEventsBytes = int(unsafe.Sizeof(kafkasink.TableEvents{}))
	// A value in a Column's interface is boxed: a string's, a slice's and
	// a time.Time's header are allocated apart from their bytes.
	stringHeaderBytes = int(unsafe.Sizeof(""))
	sliceHeaderBytes  = int(unsafe.Sizeof([]byte(nil)))
	timeBytes         = int(unsafe.Sizeof(time.Time{}))
	// numberBytes is a boxed number. Values below 256 are not allocated,
	// and the runtime packs other small ones two to a 16-byte block, but
	// not under the race detector: 16 bytes is an upper bound.
	numberBytes = 16
	// mapEntryBytes is a map entry of a composite value: its string key
	// and interface value, and the map's control byte and free slots.
	mapEntryBytes = 48
	mapBytes      = 48
)

// add appends e to the batch and counts its memory: the slice's growth
// when append reallocates it, and what e holds outside the slice.
func (b *batch) add(e kafkasink.Event) {
	before := cap(b.events)
	b.events = append(b.events, e)
	b.bytes += (cap(b.events)-before)*eventBytes + heldBytes(&e)
}

// heldBytes is the memory e holds outside its batch's slice: its row
// images, their values, and the transaction summary on its last event.
// Rows are slices of the decoder's shared blocks of 4096 Columns, so they
// are counted column by column, without rounding; a batch may also keep
// alive the unused rest of the block its last rows were cut from (at
// most 160 KiB), which is not counted.
func heldBytes(e *kafkasink.Event) int {
	n := 0
	for _, r := range [...]kafkasink.Row{e.Before, e.After} {
		n += len(r) * columnBytes
		for i := range r {
			n += valueBytes(r[i].Value)
		}
	}
	if end := e.Txn.End; end != nil {
		n += allocBytes(summaryBytes) + allocBytes(len(end.Tables)*tableEventsBytes)
	}
	return n
}

// valueBytes is the memory a Column.Value holds: its boxed header and
// its contents, each rounded up as the allocator does.
func valueBytes(v any) int {
	switch v := v.(type) {
	case nil, bool:
		return 0
	case string:
		return stringHeaderBytes + allocBytes(len(v))
	case kafkasink.Decimal:
		return stringHeaderBytes + allocBytes(len(v))
	case []byte:
		return sliceHeaderBytes + allocBytes(len(v))
	case json.RawMessage:
		return sliceHeaderBytes + allocBytes(len(v))
	case time.Time:
		return timeBytes
	case []any:
		n := sliceHeaderBytes + allocBytes(len(v)*16)
		for _, x := range v {
			n += valueBytes(x)
		}
		return n
	case map[string]any:
		n := mapBytes
		for k, x := range v {
			n += mapEntryBytes + allocBytes(len(k)) + valueBytes(x)
		}
		return n
	}
	return numberBytes
}

// allocBytes is an upper bound of what the Go allocator takes for an
// object of n bytes. Its size classes round a small object up to a
// multiple of 16 bytes, a larger one by less than a fifth (the widest
// gap between two classes, 3456 to 4096 bytes, is 18.5%), and one
// above 32 KiB to whole 8 KiB pages.
func allocBytes(n int) int {
	switch {
	case n == 0:
		return 0
	case n <= 256:
		return (n + 15) &^ 15
	case n <= 32<<10:
		return n + n/5
	}
	return (n + 8<<10 - 1) &^ (8<<10 - 1)
}
