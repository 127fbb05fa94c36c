package pgcdc

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kafkasink/kafkasink"
)

// cursorVersion is the format version of the cursor Run writes. Cursors
// without a version were written by earlier versions of pgcdc: only a
// snapshot cursor, no source identity, no confirmed position. Version 2
// adds unfinished backfills; a cursor without one is written as version
// 1, so that an earlier pgcdc still reads it, and one with a backfill as
// 2, which an earlier pgcdc refuses instead of forgetting the backfill.
// Version 3 adds the key ranges of a parallel snapshot in progress, which
// an earlier pgcdc would read as tables not begun, repeating their rows.
const cursorVersion = 3

// maxGapRecords bounds the audit list in the cursor; the oldest records
// go first.
const maxGapRecords = 32

// cursor is the Batch.Cursor of every Write Run makes, and so what the
// sink's checkpoint tells Run at start-up: which source the checkpoint
// belongs to, the highest position Run confirmed to the slot, the gaps
// accepted so far, and the state of the snapshot run, if there was one.
//
// The snapshot's fields sit at the top level of the JSON object, beside
// the others, as earlier versions wrote them, so a checkpoint of an
// earlier version still resumes its snapshot and parseCursor reads both.
type cursor struct {
	cursorFields
	// snapshot is the latest snapshot run; nil when there was none.
	snapshot *snapshotCursor
}

type cursorFields struct {
	Version int `json:"cursor_version"`
	// Source is the identity of the database the checkpoint's changes
	// came from.
	Source *sourceIdentity `json:"source,omitempty"`
	// Confirmed is the highest LSN Run confirmed to the slot. It is
	// recorded before it is confirmed, so a slot whose
	// confirmed_flush_lsn is beyond it was moved by someone else.
	Confirmed lsnText `json:"confirmed_lsn,omitempty"`
	// LastCommitEnd is the end of the commit record of the last
	// transaction whose events are all written: the
	// Event.Source.PrevCommitEnd of the first transaction the stream
	// delivers after a reconnect or a restart, which the decoder has not
	// seen commit. Debezium keeps it in its offsets as lsn_commit and
	// writes it as source.sequence[0]. Empty until a transaction was
	// written, and in cursors of earlier versions.
	LastCommitEnd lsnText `json:"last_commit_end,omitempty"`
	// Gaps are the gaps in the change history accepted by configuration
	// (Config.SlotGap), oldest first, for audit.
	Gaps []gapRecord `json:"gaps,omitempty"`
	// Backfills are the unfinished backfills, in the order they are
	// read (see backfillCursor).
	Backfills backfillList `json:"backfills,omitempty"`
	// LastSignal is where the last backfill signal taken stands in the
	// stream: a signal the server sends again after a restart is not
	// taken twice.
	LastSignal signalPos `json:"last_signal,omitzero"`
	// Tables are the publication's tables as Run last compared them,
	// recorded with Config.BackfillAddedTables only (kafkasink.TableName
	// form, sorted): a table the publication has beyond them joined it
	// since, and is backfilled. nil when not recorded; an empty
	// publication records an empty list.
	Tables []string `json:"published_tables,omitzero"`
}

// sourceIdentity names the source of a stream of changes.
type sourceIdentity struct {
	// SystemID is the database system identifier (IDENTIFY_SYSTEM): it
	// is the same on a primary and its physical standbys, and differs
	// between clusters created by separate initdb runs.
	SystemID string `json:"system_id"`
	// Timeline changes when a standby is promoted or a backup restored;
	// a change is reported, not refused.
	Timeline    int32  `json:"timeline"`
	Database    string `json:"database"`
	DatabaseOID uint32 `json:"database_oid"`
	Slot        string `json:"slot"`
}

func (s sourceIdentity) String() string {
	return fmt.Sprintf("system %s, timeline %d, database %q (oid %d), slot %q", s.SystemID, s.Timeline, s.Database, s.DatabaseOID, s.Slot)
}

// differences lists what differs between the recorded identity and the
// current one, the timeline aside.
func (s sourceIdentity) differences(now sourceIdentity) []string {
	var diffs []string
	if s.SystemID != now.SystemID {
		diffs = append(diffs, fmt.Sprintf("system identifier %s, now %s", s.SystemID, now.SystemID))
	}
	if s.Database != now.Database || s.DatabaseOID != now.DatabaseOID {
		diffs = append(diffs, fmt.Sprintf("database %q (oid %d), now %q (oid %d)", s.Database, s.DatabaseOID, now.Database, now.DatabaseOID))
	}
	if s.Slot != now.Slot {
		diffs = append(diffs, fmt.Sprintf("slot %q, now %q", s.Slot, now.Slot))
	}
	return diffs
}

// gapRecord is one gap accepted by configuration: changes between From
// and To never reached the sink from the slot.
type gapRecord struct {
	Cause  string    `json:"cause"`  // a SourceEventKind's String
	Action string    `json:"action"` // "resnapshot" or "accept"
	From   lsnText   `json:"from"`   // the last position known delivered or confirmed
	To     lsnText   `json:"to"`     // where the slot's stream begins
	Bytes  int64     `json:"wal_bytes"`
	At     time.Time `json:"at"`
	// Timeline is set for a timeline divergence: the timelines, where
	// the server's history left the checkpoint's, and the checkpoint.
	Timeline *timelineRecord `json:"timeline,omitempty"`
}

// lsnText is an LSN in its text form in JSON.
type lsnText kafkasink.LSN

func (l lsnText) MarshalText() ([]byte, error) { return kafkasink.LSN(l).AppendText(nil), nil }

func (l *lsnText) UnmarshalText(b []byte) error {
	v, err := kafkasink.ParseLSN(string(b))
	*l = lsnText(v)
	return err
}

// parseRunCursor reads the cursor of a checkpoint; a nil cursor is the
// zero cursor.
func parseRunCursor(raw json.RawMessage) (cursor, error) {
	var c cursor
	if raw == nil {
		return c, nil
	}
	if err := json.Unmarshal(raw, &c.cursorFields); err != nil {
		return cursor{}, fmt.Errorf("%w: the checkpoint's cursor is not pgcdc's: %v", kafkasink.ErrCheckpoint, err)
	}
	if c.Version > cursorVersion {
		return cursor{}, fmt.Errorf("%w: the checkpoint's cursor has format version %d, this pgcdc reads up to %d: upgrade kafkasink", kafkasink.ErrCheckpoint, c.Version, cursorVersion)
	}
	if s, ok := parseCursor(raw); ok {
		c.snapshot = &s
	}
	return c, nil
}

// marshal encodes c with the current version, the snapshot's fields
// spliced into the same object.
func (c cursor) marshal() (json.RawMessage, error) {
	c.Version = 1
	switch {
	case c.snapshot != nil && len(c.snapshot.Ranges) > 0:
		c.Version = 3
	case len(c.Backfills) > 0:
		c.Version = 2
	}
	own, err := json.Marshal(c.cursorFields)
	if err != nil || c.snapshot == nil {
		return own, err
	}
	snap, err := json.Marshal(c.snapshot)
	if err != nil {
		return nil, err
	}
	// Both are objects with at least one member: "{a}" + "{b}" is
	// "{a,b}".
	out := append(own[:len(own)-1:len(own)-1], ',')
	return append(out, snap[1:]...), nil
}

// addGap appends g to the audit list, keeping the newest maxGapRecords.
func (c *cursor) addGap(g gapRecord) {
	c.Gaps = append(c.Gaps, g)
	if n := len(c.Gaps); n > maxGapRecords {
		c.Gaps = append([]gapRecord(nil), c.Gaps[n-maxGapRecords:]...)
	}
}

// gapSnapshot is the state of the re-snapshot the latest gap asked for
// (Config.SlotGap = SlotGapResnapshot). Such a run is read whatever
// Config.Snapshot says, or the gap would stay open.
type gapSnapshot int

const (
	gapSnapshotNone   gapSnapshot = iota // none asked for, or it is done
	gapSnapshotFresh                     // its run is not recorded yet: a new one
	gapSnapshotResume                    // its run is recorded and unfinished
)

// gapSnapshot returns the state of the latest gap's re-snapshot. A gap's
// run is the one whose LSN is the gap's end.
func (c *cursor) gapSnapshot() gapSnapshot {
	if len(c.Gaps) == 0 {
		return gapSnapshotNone
	}
	g := c.Gaps[len(c.Gaps)-1]
	if g.Action != SlotGapResnapshot.String() {
		return gapSnapshotNone
	}
	if c.snapshot == nil {
		return gapSnapshotFresh
	}
	lsn, err := kafkasink.ParseLSN(c.snapshot.LSN)
	switch {
	case err != nil || lsn != kafkasink.LSN(g.To):
		return gapSnapshotFresh
	case c.snapshot.Done:
		return gapSnapshotNone
	}
	return gapSnapshotResume
}
