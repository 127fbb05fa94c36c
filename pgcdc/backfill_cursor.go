package pgcdc

import (
	"fmt"
	"slices"
	"time"
)

// backfillCursor is one unfinished backfill as Run's cursor records it
// (cursor.Backfills): every Write carries the list, so a chunk's rows, the
// backfill's progress and the stream's position reach the checkpoint in
// one Write, and after a restart the backfill goes on after the last
// chunk the checkpoint holds.
type backfillCursor struct {
	ID    string `json:"id"`
	Table string `json:"table"` // "schema.table"
	Where string `json:"where,omitempty"`
	// KeyColumns name the columns of LastKey, the table's primary key or
	// replica identity index, as the first chunk found them; LastKey is
	// the text form of the key of the last row read, empty before the
	// first chunk.
	KeyColumns []string  `json:"key_columns,omitempty"`
	LastKey    []string  `json:"last_key,omitempty"`
	Rows       int64     `json:"rows"`
	Chunks     int64     `json:"chunks"`
	Paused     bool      `json:"paused,omitempty"`
	Requested  time.Time `json:"requested"`
	By         string    `json:"by"` // "api", "signal" or "added"
}

// signalPos orders the signals as the stream delivers them: by the commit
// LSN of their transaction (a non-transactional one's own LSN), then by
// their own LSN, for the signals of one transaction.
type signalPos struct {
	Commit  lsnText `json:"commit"`
	Message lsnText `json:"message"`
}

// after reports whether p comes after q.
func (p signalPos) after(q signalPos) bool {
	return p.Commit > q.Commit || p.Commit == q.Commit && p.Message > q.Message
}

func (c backfillCursor) status() BackfillStatus {
	return BackfillStatus{ID: c.ID, Table: c.Table, Where: c.Where, Paused: c.Paused, Rows: c.Rows, Chunks: c.Chunks,
		LastKey: slices.Clone(c.LastKey), Requested: c.Requested, By: c.By}
}

// backfillList is the unfinished backfills in the order Run reads them:
// the first one not paused is read, one chunk at a time.
type backfillList []backfillCursor

// clone returns a copy that shares nothing with l.
func (l backfillList) clone() backfillList {
	out := slices.Clone(l)
	for i := range out {
		out[i].KeyColumns = slices.Clone(out[i].KeyColumns)
		out[i].LastKey = slices.Clone(out[i].LastKey)
	}
	return out
}

// running returns the index of the backfill to read next, -1 when none.
func (l backfillList) running() int {
	return slices.IndexFunc(l, func(c backfillCursor) bool { return !c.Paused })
}

// find returns the index of backfill id, -1 when there is none.
func (l backfillList) find(id string) int {
	return slices.IndexFunc(l, func(c backfillCursor) bool { return c.ID == id })
}

// busy returns the refusal of a second backfill of table, nil when none
// of l reads it.
func (l backfillList) busy(table string) *BackfillError {
	i := slices.IndexFunc(l, func(c backfillCursor) bool { return c.Table == table })
	if i < 0 {
		return nil
	}
	return &BackfillError{Table: table, Problem: fmt.Sprintf("backfill %s of this table is still running (%d rows so far): "+
		"wait for it to finish, or cancel it first (Backfills.Cancel, or a stop-snapshot signal)", l[i].ID, l[i].Rows)}
}
