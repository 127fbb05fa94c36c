package pgcdc

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/kafkasink/kafkasink"
)

// window remembers, by transaction id, the keys of the backfilled tables
// that the transactions the stream recently emitted touched: a chunk drops
// the rows of every such transaction its snapshot still sees in progress
// (see backfiller.chunk for why).
//
// Transactions are named by the 32-bit id pgoutput's Begin carries, while
// pg_current_snapshot lists 64-bit ones (xid8: the epoch above the 32-bit
// id). Comparing the low 32 bits is exact here: the ids a snapshot lists
// lie between its xmin and xmax, the window forgets every id below a
// chunk's xmin and holds at most windowMax of them, and PostgreSQL's
// wraparound protection keeps every id still in use within 2^31 of the
// newest, so no two ids the comparison meets share their low 32 bits.
type window struct {
	seq   uint64              // numbers the transactions in the order first seen
	txns  map[uint32]*touched // by transaction id
	order []uint32            // the ids in txns, oldest first
	// since is, per backfilled table, the seq of the first transaction
	// whose keys of that table were recorded: an older transaction's
	// keys are unknown.
	since map[string]uint64
}

// windowMax bounds the transactions a window remembers. One forgotten
// while its snapshot still shows it in progress (which takes a commit
// waiting that long for a synchronous standby) makes the chunk wait for
// it instead of guessing.
const windowMax = 1 << 16

// touched is what one emitted transaction did to the backfilled tables:
// each entry is a table, a NUL, and either a key's canonical form (a JSON
// array, keyText), "*" (the table was truncated) or "?" (a row whose key
// is not known, such as one whose key value was an unchanged TOAST).
type touched struct {
	seq  uint64
	keys map[string]struct{}
}

const (
	touchedAll     = "*"
	touchedUnknown = "?"
)

func newWindow() *window {
	return &window{txns: make(map[uint32]*touched), since: make(map[string]uint64)}
}

// txn returns the entry of transaction xid, which the stream emits now.
func (w *window) txn(xid uint32) *touched {
	t := w.txns[xid]
	if t == nil {
		w.seq++
		t = &touched{seq: w.seq}
		w.txns[xid] = t
		w.order = append(w.order, xid)
		if len(w.order) > windowMax {
			delete(w.txns, w.order[0])
			w.order = w.order[1:]
		}
	}
	return t
}

// track starts recording the keys of table, from the next transaction on.
func (w *window) track(table string) {
	if _, ok := w.since[table]; !ok {
		w.since[table] = w.seq + 1
	}
}

// observe records the keys event e touches, when its table is tracked;
// keyColumns are the table's chunk key.
func (w *window) observe(e *kafkasink.Event, table string, keyColumns []string) {
	t := w.txn(e.XID)
	add := func(k string) {
		if t.keys == nil {
			t.keys = make(map[string]struct{})
		}
		t.keys[table+"\x00"+k] = struct{}{}
	}
	if e.Op == kafkasink.OpTruncate {
		add(touchedAll)
		return
	}
	for _, row := range []kafkasink.Row{e.Before, e.After} {
		if row == nil {
			continue
		}
		k, ok := keyText(row, keyColumns)
		if !ok {
			k = touchedUnknown
		}
		add(k)
	}
}

// keyText returns the canonical form of row's key: its values, as the
// decoder converts them, as a JSON array. The stream's images and the
// chunk's rows go through the same conversion of PostgreSQL's text form,
// so equal keys have equal forms. ok is false when row lacks a key column
// or holds it as an unchanged TOAST value.
func keyText(row kafkasink.Row, keyColumns []string) (string, bool) {
	vals := make([]any, len(keyColumns))
	for i, name := range keyColumns {
		c, ok := row.Get(name)
		if !ok || c.Unchanged {
			return "", false
		}
		vals[i] = c.Value
	}
	b, err := json.Marshal(vals)
	return string(b), err == nil
}

// windowPlan is what a chunk's snapshot means for its rows: drop those
// whose key is in drop, or every row (all); or read the chunk again later
// (retry says why).
type windowPlan struct {
	drop  map[string]struct{} // canonical keys (keyText)
	all   bool
	retry string
}

// plan decides for a chunk of table read in a snapshot whose in-progress
// list is xip and whose xmax is xmax, of which committed are those the
// commit log already shows committed (their commit waits, for a
// synchronous standby say, before they become visible).
func (w *window) plan(table string, xip []uint64, xmax uint64, committed map[uint64]bool) windowPlan {
	p := windowPlan{drop: make(map[string]struct{})}
	// An emitted transaction at or above xmax is invisible to the
	// snapshot without being listed in xip: the stream decodes a commit
	// once its record is written, a moment before the transaction
	// leaves the proc array, and xmax is one above the newest that left
	// it.
	xip = slices.Clip(xip)
	for _, x := range w.order {
		if d := x - uint32(xmax); int32(d) >= 0 {
			xip = append(xip, xmax+uint64(d))
		}
	}
	prefix := table + "\x00"
	since, tracked := w.since[table]
	for _, x := range xip {
		t := w.txns[uint32(x)]
		switch {
		case t == nil && committed[x]:
			// Emitted before the window remembers (before this
			// session, or too long ago), or not yet decoded: it
			// cannot be told, so wait until it is visible.
			p.retry = fmt.Sprintf("transaction %d has committed but the chunk's snapshot still sees it in progress, and the stream may have emitted it already", x)
			return p
		case t == nil:
			// In progress, to be streamed after the chunk.
		case !tracked || t.seq < since:
			p.retry = fmt.Sprintf("transaction %d, streamed before the backfill of %s began, is still in progress for the chunk's snapshot", x, table)
			return p
		default:
			for k := range t.keys {
				if len(k) <= len(prefix) || k[:len(prefix)] != prefix {
					continue
				}
				switch k := k[len(prefix):]; k {
				case touchedAll:
					p.all = true
				case touchedUnknown:
					p.retry = fmt.Sprintf("transaction %d, still in progress for the chunk's snapshot, changed a row of %s whose key the stream did not carry", x, table)
					return p
				default:
					p.drop[k] = struct{}{}
				}
			}
		}
	}
	return p
}

// forget drops the transactions below xmin, the oldest transaction a
// chunk's snapshot still saw in progress: no later snapshot sees them in
// progress.
func (w *window) forget(xmin uint64) {
	for len(w.order) > 0 && int32(w.order[0]-uint32(xmin)) < 0 {
		delete(w.txns, w.order[0])
		w.order = w.order[1:]
	}
}
