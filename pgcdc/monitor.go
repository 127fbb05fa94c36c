package pgcdc

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkasink/kafkasink"
)

// Monitor reports what a Run is doing, for metrics and health checks: put
// one in Config.Monitor and read it with Stats from any goroutine while Run
// runs. One Monitor serves one Run at a time. The zero Monitor is ready to
// use.
type Monitor struct {
	state      atomic.Int32
	attempts   atomic.Int64
	failure    atomic.Pointer[runFailure]
	serverEnd  atomic.Uint64
	confirmed  atomic.Uint64
	events     atomic.Int64
	snapshot   atomic.Int64
	lastCommit atomic.Int64            // Unix nanoseconds; 0 before the first
	spool      atomic.Pointer[Decoder] // the session's, for its SpoolBytes
	backfill   atomic.Pointer[runFailure]
	failover   atomic.Bool
	standby    atomic.Pointer[StandbySync]

	mu        sync.Mutex
	tables    map[string]TableProgress // guarded by mu
	clocks    map[string]tableClock    // guarded by mu
	backfills []BackfillProgress       // guarded by mu
	changes   []PublicationChange      // guarded by mu
}

// BackfillProgress is how far one unfinished backfill got.
type BackfillProgress struct {
	BackfillStatus
	// RowsLeft estimates the rows still to read: the table's row
	// estimate (pg_class.reltuples, as ANALYZE and autovacuum last
	// measured it) less Rows, at least 0; with a condition it is an
	// upper bound. -1 until a chunk has read the estimate, or when the
	// table was never analyzed.
	RowsLeft int64
	// RowsPerSecond is the rate of the backfill in the current
	// replication session: rows delivered since it began or resumed,
	// over the time since.
	RowsPerSecond float64
}

// TableProgress is how far a snapshot got through one table in this Run.
type TableProgress struct {
	Rows int64 // rows written by this Run (a resumed snapshot counts from where it resumed)
	Done bool  // the table is read to its end
	// Ranges are the rows this Run wrote from each range of the table's
	// key a parallel snapshot reads (Config.SnapshotWorkers), in key
	// order; nil for a table read one chunk after another.
	Ranges []RangeProgress
	// RowsPerSecond is Rows over the time from when this Run began the
	// table to its last chunk written.
	RowsPerSecond float64
	// RowsLeft estimates the rows still to read: the table's row
	// estimate (pg_class.reltuples, as ANALYZE and autovacuum last
	// measured it) less the rows written, at least 0; -1 when the table
	// was never analyzed. 0 once Done.
	RowsLeft int64
	// TimeLeft is RowsLeft at RowsPerSecond; 0 when either is unknown or
	// the table is done.
	TimeLeft time.Duration
}

// RangeProgress is one key range of a table in a parallel snapshot.
type RangeProgress struct {
	Rows int64 // rows written by this Run
	Done bool  // the range is read to its end
}

// tableClock is what Monitor keeps of a snapshot table beside its
// TableProgress: when this Run began it and wrote its last chunk, and the
// row estimate (-1 unknown).
type tableClock struct {
	began, last time.Time
	estimate    int64
}

// RunState is what a Run is doing.
type RunState int32

// The states of a Run, as Monitor reports them.
const (
	RunNotStarted   RunState = iota // Run has not begun with this Monitor
	RunConnecting                   // connecting, checking the server, the slot and the checkpoint
	RunSnapshotting                 // reading the tables (Config.Snapshot)
	RunStreaming                    // the slot streams; changes are written as they come
	RunWaiting                      // waiting to reconnect after a failed attempt (RunStats.LastError)
	RunStopped                      // Run returned
)

var runStateNames = [...]string{"not started", "connecting", "snapshotting", "streaming", "waiting to reconnect", "stopped"}

// String returns the state's name, such as "streaming".
func (s RunState) String() string {
	if s >= 0 && int(s) < len(runStateNames) {
		return runStateNames[s]
	}
	return "RunState(?)"
}

// RunStats is what a Monitor reports.
type RunStats struct {
	State RunState
	// Reconnects counts the attempts after Run's first: each follows a
	// failed one, whose error is LastError (the newest), at
	// LastErrorTime.
	Reconnects    int64
	LastError     string
	LastErrorTime time.Time
	// ServerWALEnd is the end of the server's WAL as its last message
	// said; Confirmed the position last confirmed to the slot, below
	// which every change is in Kafka. LagBytes is the WAL between them:
	// what the slot holds that is not delivered yet (it also counts WAL
	// of unpublished tables, which the next confirmation passes).
	ServerWALEnd kafkasink.LSN
	Confirmed    kafkasink.LSN
	LagBytes     int64
	// Events counts the events written (Writes that returned nil),
	// SnapshotRows the snapshot rows among them. LastCommit is the commit
	// time of the newest change written; now minus it is how far behind
	// the database Kafka is while changes flow.
	Events       int64
	SnapshotRows int64
	LastCommit   time.Time
	// SpoolBytes is what the spool holds on disk now: the streamed
	// transactions not yet committed (see Config.SpoolMaxBytes).
	SpoolBytes int64
	// LastBackfillError is the last backfill request or signal Run
	// refused, or the last backfill that stopped on an error, at
	// LastBackfillErrorTime; the stream went on. Empty when none.
	LastBackfillError     string
	LastBackfillErrorTime time.Time
	// Backfills is the progress of each unfinished backfill, in the
	// order they are read, as of the last change; nil when none.
	Backfills []BackfillProgress
	// PublicationChanges are the tables that joined or left the
	// publication while Run streamed, oldest first, the newest 32 of
	// them; nil when none did.
	PublicationChanges []PublicationChange
	// SnapshotTables is each table's progress in this Run's snapshot,
	// by "schema.table"; nil when Run read no snapshot.
	SnapshotTables map[string]TableProgress
	// FailoverSlot is whether the slot is a failover slot (PostgreSQL
	// 17+; see Config.NoFailoverSlot), as Run last found or made it.
	FailoverSlot bool
	// StandbySync is what Run last read of the slot's synchronised copy
	// on Config.FailoverStandby; zero without it.
	StandbySync StandbySync
}

// runFailure is a failed attempt of Run.
type runFailure struct {
	err string
	at  time.Time
}

// Stats returns what the Run using m has done and is doing. It is safe to
// call from any goroutine.
func (m *Monitor) Stats() RunStats {
	st := RunStats{
		State:        RunState(m.state.Load()),
		Reconnects:   max(m.attempts.Load()-1, 0),
		ServerWALEnd: kafkasink.LSN(m.serverEnd.Load()),
		Confirmed:    kafkasink.LSN(m.confirmed.Load()),
		Events:       m.events.Load(),
		SnapshotRows: m.snapshot.Load(),
	}
	if f := m.failure.Load(); f != nil {
		st.LastError, st.LastErrorTime = f.err, f.at
	}
	if f := m.backfill.Load(); f != nil {
		st.LastBackfillError, st.LastBackfillErrorTime = f.err, f.at
	}
	if st.ServerWALEnd > st.Confirmed {
		st.LagBytes = int64(st.ServerWALEnd - st.Confirmed)
	}
	if ns := m.lastCommit.Load(); ns != 0 {
		st.LastCommit = time.Unix(0, ns)
	}
	if d := m.spool.Load(); d != nil {
		st.SpoolBytes = d.SpoolBytes()
	}
	st.FailoverSlot = m.failover.Load()
	if s := m.standby.Load(); s != nil {
		st.StandbySync = *s
	}
	m.mu.Lock()
	st.SnapshotTables = m.snapshotTables()
	st.Backfills = slices.Clone(m.backfills)
	st.PublicationChanges = slices.Clone(m.changes)
	m.mu.Unlock()
	return st
}

// The methods below are Run's; each does nothing on a nil Monitor, so Run
// calls them whether Config.Monitor is set or not.

func (m *Monitor) setState(s RunState) {
	if m != nil {
		m.state.Store(int32(s))
	}
}

// attempt notes that Run begins an attempt.
func (m *Monitor) attempt() {
	if m != nil {
		m.attempts.Add(1)
		m.state.Store(int32(RunConnecting))
	}
}

// failed notes the error of a failed attempt, after which Run waits.
func (m *Monitor) failed(err error) {
	if m != nil {
		m.failure.Store(&runFailure{err: err.Error(), at: time.Now()})
		m.state.Store(int32(RunWaiting))
	}
}

// backfillProgress makes p the progress Stats reports; it is the
// caller's to give.
func (m *Monitor) backfillProgress(p []BackfillProgress) {
	if m != nil {
		m.mu.Lock()
		m.backfills = p
		m.mu.Unlock()
	}
}

// publicationChange notes a table that joined or left the publication.
func (m *Monitor) publicationChange(c PublicationChange) {
	if m != nil {
		m.mu.Lock()
		m.changes = append(m.changes, c)
		if n := len(m.changes); n > publicationChangesMax {
			m.changes = slices.Clone(m.changes[n-publicationChangesMax:])
		}
		m.mu.Unlock()
	}
}

// backfillFailed notes a refused backfill request or signal, or a
// backfill stopped by an error.
func (m *Monitor) backfillFailed(err error) {
	if m != nil {
		m.backfill.Store(&runFailure{err: err.Error(), at: time.Now()})
	}
}

// watchSpool makes d, a session's decoder, the one whose spool
// SpoolBytes reports.
func (m *Monitor) watchSpool(d *Decoder) {
	if m != nil {
		m.spool.Store(d)
	}
}

func (m *Monitor) serverWALEnd(lsn uint64) {
	if m != nil {
		m.serverEnd.Store(lsn)
	}
}

func (m *Monitor) failoverSlot(on bool) {
	if m != nil {
		m.failover.Store(on)
	}
}

func (m *Monitor) standbySync(st StandbySync) {
	if m != nil {
		m.standby.Store(&st)
	}
}

func (m *Monitor) confirm(lsn kafkasink.LSN) {
	if m != nil {
		m.confirmed.Store(uint64(lsn))
	}
}

// snapshotChunk notes a snapshot chunk of rows rows written, with cur, the
// snapshot cursor after it: the table it read is the one in progress, or,
// when none is, the one it finished.
func (m *Monitor) snapshotChunk(rows int, cur snapshotCursor) {
	if m == nil {
		return
	}
	table, done := cur.Table, cur.Table == ""
	if done && len(cur.DoneTables) > 0 {
		table = cur.DoneTables[len(cur.DoneTables)-1]
	}
	if table == "" {
		return // the run recorded before its first table
	}
	m.snapshotRows(table, rows, done)
}

// snapshotRows notes rows of table written by a snapshot, done when they
// finish it.
func (m *Monitor) snapshotRows(table string, rows int, done bool) {
	m.snapshotRange(table, -1, rows, false, done)
}

// snapshotTable notes that a snapshot begins table, of ranges key ranges
// (0 when read one chunk after another) and about estimate rows (-1
// unknown).
func (m *Monitor) snapshotTable(table string, ranges int, estimate int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tables == nil {
		m.tables, m.clocks = make(map[string]TableProgress), make(map[string]tableClock)
	}
	p := m.tables[table]
	if ranges > 0 {
		p.Ranges = make([]RangeProgress, ranges)
	}
	m.tables[table] = p
	m.clocks[table] = tableClock{began: time.Now(), estimate: estimate}
}

// snapshotRange notes rows of range rng (-1: none) of table written,
// rangeDone when they finish the range, done when they finish the table.
func (m *Monitor) snapshotRange(table string, rng, rows int, rangeDone, done bool) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tables == nil {
		m.tables, m.clocks = make(map[string]TableProgress), make(map[string]tableClock)
	}
	p := m.tables[table]
	p.Rows += int64(rows)
	p.Done = p.Done || done
	if rng >= 0 && rng < len(p.Ranges) {
		p.Ranges = slices.Clone(p.Ranges) // Stats handed out the old one
		p.Ranges[rng].Rows += int64(rows)
		p.Ranges[rng].Done = p.Ranges[rng].Done || rangeDone
	}
	m.tables[table] = p
	c, ok := m.clocks[table]
	if !ok {
		c = tableClock{began: time.Now(), estimate: -1}
	}
	c.last = time.Now()
	m.clocks[table] = c
}

// snapshotTables returns each table's progress with its rate and
// estimates. m.mu is held.
func (m *Monitor) snapshotTables() map[string]TableProgress {
	out := maps.Clone(m.tables)
	for name, p := range out {
		c := m.clocks[name]
		if secs := c.last.Sub(c.began).Seconds(); secs > 0 {
			p.RowsPerSecond = float64(p.Rows) / secs
		}
		switch {
		case p.Done:
		case c.estimate < 0:
			p.RowsLeft = -1
		default:
			p.RowsLeft = max(0, c.estimate-p.Rows)
			if p.RowsPerSecond > 0 {
				p.TimeLeft = time.Duration(float64(p.RowsLeft) / p.RowsPerSecond * float64(time.Second))
			}
		}
		out[name] = p
	}
	return out
}

// delivered notes the events of a Write that returned nil.
func (m *Monitor) delivered(events []kafkasink.Event) {
	if m == nil || len(events) == 0 {
		return
	}
	m.events.Add(int64(len(events)))
	var rows int64
	for i := range events {
		if events[i].Op == kafkasink.OpRead {
			rows++
		}
	}
	m.snapshot.Add(rows)
	if c := events[len(events)-1].Commit; !c.IsZero() {
		m.lastCommit.Store(c.UnixNano())
	}
}
