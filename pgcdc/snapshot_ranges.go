package pgcdc

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
)

// This file splits a table into ranges of its chunk key for a parallel
// snapshot (Config.SnapshotWorkers), and reads a range.
//
// Ranges of the key, not of pages (ctid): a key range is a set of keys
// whatever state of the table a transaction sees, so a range resumed by
// a later transaction after a crash (the exported snapshot is gone) goes
// on exactly where its last delivered key left it, and a row changed
// since is read in its newer state and then streamed, as in a resumed
// serial snapshot. A page range is not: a row updated since moves to
// another page, and would be read twice or never (see refuseKeyless).

// keyRange is one range of a table's chunk key in a parallel snapshot's
// cursor: the keys above After up to Through. The ranges of a table cover
// every key it had at the snapshot.
type keyRange struct {
	Table      string   `json:"table"`
	KeyColumns []string `json:"key_columns"`
	// After is the key of the last row delivered from the range, or
	// before any its lower bound, exclusive; nil from the first key.
	After []string `json:"after,omitempty"`
	// Through is the range's last key, inclusive: a key the table had
	// at the snapshot, so that every range has a row there. nil to the
	// table's end, only in the range a cursor written before ranges
	// existed resumes as.
	Through []string `json:"through,omitempty"`
	// Done is set once the range's last row is delivered.
	Done bool `json:"done,omitempty"`
}

// rangesPerWorker is how many ranges a table large enough is split into
// per worker: more ranges than workers even out ranges of uneven sizes.
const rangesPerWorker = 4

// samplesPerRange is how many keys the split samples per range.
const samplesPerRange = 64

// maxSamples bounds the keys the split keeps in memory, whatever the
// table's statistics say.
const maxSamples = 4096

// splitRanges splits table ti into at most n ranges of its chunk key, at
// keys sampled from the table (TABLESAMPLE SYSTEM, a few pages read at
// random) in the snapshot's transaction, so each range holds about as
// many rows. Its last range ends at the table's last key. An empty table
// has no range. estimate is the planner's estimate of its rows, 0 when
// unknown.
func splitRanges(ctx context.Context, tx pgx.Tx, ti *tableInfo, n int, chunkRows int, estimate float64) ([]keyRange, error) {
	conn := tx.Conn().PgConn()
	keys, _ := ti.keyList()
	last, _, err := queryKeys(ctx, conn, ti.selectFrom(keys)+whereClause(ti.filter())+" ORDER BY "+descending(keys)+" LIMIT 1", 1)
	if err != nil || len(last) == 0 {
		return nil, err
	}
	n = min(n, chunksOf(estimate, chunkRows))
	var cuts [][]string
	if n > 1 {
		// A table never analyzed is sampled whole: its keys count
		// its rows.
		pct := 100.0
		if estimate > 0 {
			pct = min(100, 100*float64(n*samplesPerRange)/estimate)
		}
		sample := ti.selectFrom(keys) + " TABLESAMPLE SYSTEM (" + strconv.FormatFloat(pct, 'f', 6, 64) + ")" + whereClause(ti.filter()) + " ORDER BY " + strings.Join(keys, ", ")
		sampled, seen, err := queryKeys(ctx, conn, sample, maxSamples)
		if err != nil {
			return nil, err
		}
		if estimate <= 0 {
			n = min(n, chunksOf(float64(seen), chunkRows))
		}
		cuts = cutPoints(sampled, n, last[0])
	}
	names := columnNames(ti.chunkKey)
	out := make([]keyRange, 0, len(cuts)+1)
	var after []string
	for _, through := range append(cuts, last[0]) {
		out = append(out, keyRange{Table: ti.name(), KeyColumns: names, After: after, Through: through})
		after = through
	}
	return out, nil
}

// chunksOf returns how many chunks of chunkRows rows hold rows rows, at
// least 1; a large number when rows is unknown (0).
func chunksOf(rows float64, chunkRows int) int {
	if rows <= 0 {
		return math.MaxInt
	}
	return max(1, int(math.Ceil(rows/float64(chunkRows))))
}

// cutPoints picks n-1 keys from sampled, in key order, at even steps,
// leaving out repeats and the table's last key.
func cutPoints(sampled [][]string, n int, last []string) [][]string {
	var cuts [][]string
	for i := 1; i < n && len(sampled) > 0; i++ {
		k := sampled[i*len(sampled)/n]
		if slices.Equal(k, last) || len(cuts) > 0 && slices.Equal(k, cuts[len(cuts)-1]) {
			continue
		}
		cuts = append(cuts, k)
	}
	return cuts
}

// estimateRows returns the planner's estimate of the table's rows (its
// partitions' for a partitioned table), 0 when it was never analyzed.
func estimateRows(ctx context.Context, tx pgx.Tx, ti *tableInfo) (float64, error) {
	var rows float64
	err := tx.QueryRow(ctx, `SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::float8 FROM pg_class c
		WHERE c.oid = $1::regclass OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)`, qualified(ti.schema, ti.table)).Scan(&rows)
	if err != nil {
		return 0, fmt.Errorf("pgcdc: snapshot: estimating the rows of %s: %w", ti.name(), err)
	}
	return rows, nil
}

// knownRows is a row estimate for Monitor: -1 when unknown (0).
func knownRows(estimate float64) int64 {
	if estimate <= 0 {
		return -1
	}
	return int64(estimate)
}

// queryKeys runs a query of key columns and returns the text form of its
// rows, at most keep of them: a uniform sample of them when it returns
// more (reservoir sampling), in the query's order, and how many rows it
// returned.
func queryKeys(ctx context.Context, conn *pgconn.PgConn, sql string, keep int) ([][]string, int, error) {
	rr := conn.ExecParams(ctx, sql, nil, nil, nil, nil)
	type sampled struct {
		seq int
		key []string
	}
	var kept []sampled
	seq := 0
	for ; rr.NextRow(); seq++ {
		key := make([]string, len(rr.Values()))
		for i, v := range rr.Values() {
			key[i] = string(v)
		}
		switch {
		case len(kept) < keep:
			kept = append(kept, sampled{seq, key})
		default:
			if j := rand.IntN(seq + 1); j < keep {
				kept[j] = sampled{seq, key}
			}
		}
	}
	if _, err := rr.Close(); err != nil {
		return nil, 0, fmt.Errorf("pgcdc: snapshot: splitting a table into ranges: %w", err)
	}
	slices.SortFunc(kept, func(a, b sampled) int { return a.seq - b.seq })
	out := make([][]string, len(kept))
	for i, s := range kept {
		out[i] = s.key
	}
	return out, seq, nil
}

// keyList returns the chunk key's columns, quoted, and the casts of
// parameters to their types, from $first on.
func (ti *tableInfo) keyList() (keys []string, params func(first int) []string) {
	keys = make([]string, len(ti.chunkKey))
	for i, c := range ti.chunkKey {
		keys[i] = pgx.Identifier{c.name}.Sanitize()
	}
	return keys, func(first int) []string {
		out := make([]string, len(ti.chunkKey))
		for i, c := range ti.chunkKey {
			out[i] = fmt.Sprintf("$%d::%s", first+i, c.typ)
		}
		return out
	}
}

func descending(keys []string) string {
	return strings.Join(keys, " DESC, ") + " DESC"
}

// rangeQuery returns the query of the next chunk of rows rows of range r
// and its parameters: the published columns, then the chunk key, of the
// rows with keys above r.After up to r.Through, in key order.
func (ti *tableInfo) rangeQuery(r keyRange, rows int) (string, [][]byte) {
	keys, params := ti.keyList()
	tuple := "(" + strings.Join(keys, ", ") + ")"
	where := ti.filter()
	var args [][]byte
	if r.After != nil {
		where = append(where, tuple+" > ("+strings.Join(params(len(args)+1), ", ")+")")
		args = appendKey(args, r.After)
	}
	if r.Through != nil {
		where = append(where, tuple+" <= ("+strings.Join(params(len(args)+1), ", ")+")")
		args = appendKey(args, r.Through)
	}
	sql := ti.selectFrom(append(ti.selectList(), keys...)) + whereClause(where) + " ORDER BY " + strings.Join(keys, ", ") + fmt.Sprintf(" LIMIT %d", rows)
	return sql, args
}

func appendKey(args [][]byte, key []string) [][]byte {
	for _, k := range key {
		args = append(args, []byte(k))
	}
	return args
}

// checkRanges refuses resuming ranges of a table now read by another key
// than theirs.
func checkRanges(ranges []keyRange, ti *tableInfo) error {
	names := columnNames(ti.chunkKey)
	for _, r := range ranges {
		if !slices.Equal(r.KeyColumns, names) || r.After != nil && len(r.After) != len(names) || r.Through != nil && len(r.Through) != len(names) {
			return fmt.Errorf("%w: the snapshot cursor of %s resumes ranges of a key of columns %v, but the table is now read by %v: "+
				"restore the table's key, or take a new snapshot into a new sink (a new sink id)", kafkasink.ErrCheckpoint, ti.name(), r.KeyColumns, names)
		}
	}
	return nil
}
