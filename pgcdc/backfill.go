package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// This file is the library's way to ask a running Run for backfills:
// Backfills, the controller a caller puts in Config.Backfills. The engine
// is in backfill_chunk.go, what the checkpoint keeps of it in
// backfill_cursor.go, the signal inside the stream in backfill_signal.go.

// ErrBackfillNotFound is returned by Backfills.Pause, Resume and Cancel
// when no unfinished backfill has the id given. Test with errors.Is.
var ErrBackfillNotFound = errors.New("pgcdc: no such backfill")

// BackfillRequest asks for a backfill of one table while Run streams: its
// rows, or those matching Where, are read in key order and delivered as
// read events (kafkasink.OpRead) between the stream's changes, without a
// row ever overwriting a newer change of its key. See docs/backfill.md.
type BackfillRequest struct {
	// Table is the table to read, "schema.table" or "table" (in public),
	// as Config.Tables names tables. It must be in Config.Publication.
	Table string
	// Where, when set, reads only the rows it matches: a boolean SQL
	// expression over the table's published columns, such as
	// "region = 'eu'". It applies inside the publication's own row
	// filter and column list, so a backfill never delivers a row or a
	// column the publication leaves out. PostgreSQL checks it before
	// the backfill is accepted.
	Where string
}

// BackfillStatus is one unfinished backfill, as Backfills.List reports it.
type BackfillStatus struct {
	ID     string // unique per backfill; Event.BackfillRunID of its rows
	Table  string // "schema.table"
	Where  string // the request's condition, "" for every row
	Paused bool
	// Rows and Chunks count the backfill's rows and chunks read, across
	// restarts. A chunk counts once Run has read it and handed it to
	// the sink, and the checkpoint holds it once that Write returns: a
	// backfill resumes after a crash up to one chunk before what List
	// showed last.
	Rows, Chunks int64
	// LastKey is the text form of the key of the last row read, nil
	// before the first chunk; the next chunk reads after it.
	LastKey []string
	// Requested is when the backfill was accepted; By says how it was
	// asked for: "api" (Backfills.Request), "signal", or "added" (its
	// table joined the publication, Config.BackfillAddedTables).
	Requested time.Time
	By        string
}

// BackfillError is a backfill request or signal Run refused: an unknown
// table, one outside the publication, an invalid condition, a table
// without a usable key, a second backfill of a table while one runs, a
// malformed signal. The stream goes on. Backfills.Request returns it; a
// refused signal is logged and noted in the Monitor
// (RunStats.LastBackfillError).
type BackfillError struct {
	Table   string // the table asked for, "" when unknown
	Problem string // what is wrong and what to do
	Err     error  // the server's error, when it said what is wrong
}

// Error names the table and the problem.
func (e *BackfillError) Error() string {
	s := "pgcdc: backfill"
	if e.Table != "" {
		s += " of " + e.Table
	}
	s += ": " + e.Problem
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns Err.
func (e *BackfillError) Unwrap() error { return e.Err }

// Backfills asks a running Run for backfills: put one in Config.Backfills
// and call its methods from any goroutine; it is safe for concurrent use.
// The zero Backfills is ready to use. One Backfills serves one Run.
//
// Every method that changes a backfill waits until Run, streaming, has
// taken the change, between two source transactions, and returns what it
// decided; while Run connects, takes the initial snapshot or reconnects,
// they wait, bounded by ctx. A change is recorded in the sink's checkpoint
// with the next Write, which follows within Config.BatchMaxWait: a Run that
// stops before that Write forgets it, as List then shows.
type Backfills struct {
	mu     sync.Mutex
	cmds   []*backfillCmd   // waiting for Run, guarded by mu
	wake   chan struct{}    // the streaming session's, nil when none; guarded by mu
	status []BackfillStatus // as Run last published it, guarded by mu
}

type backfillCmdKind int

const (
	cmdRequest backfillCmdKind = iota
	cmdPause
	cmdResume
	cmdCancel
)

// backfillCmd is one call waiting for Run: reply gets its verdict.
type backfillCmd struct {
	kind  backfillCmdKind
	req   BackfillRequest
	id    string
	reply chan backfillReply // capacity 1
}

type backfillReply struct {
	status BackfillStatus
	err    error
}

// Request asks for a backfill and returns it once accepted, or a
// *BackfillError saying why not.
func (b *Backfills) Request(ctx context.Context, req BackfillRequest) (BackfillStatus, error) {
	r, err := b.do(ctx, &backfillCmd{kind: cmdRequest, req: req})
	return r.status, err
}

// List returns the unfinished backfills, in the order Run reads them, as
// of the last change Run made. A finished or cancelled backfill is not
// listed.
func (b *Backfills) List() []BackfillStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := slices.Clone(b.status)
	for i := range out {
		out[i].LastKey = slices.Clone(out[i].LastKey)
	}
	return out
}

// Pause stops reading backfill id until Resume; the stream goes on.
func (b *Backfills) Pause(ctx context.Context, id string) error {
	_, err := b.do(ctx, &backfillCmd{kind: cmdPause, id: id})
	return err
}

// Resume goes on with a paused backfill from its last chunk.
func (b *Backfills) Resume(ctx context.Context, id string) error {
	_, err := b.do(ctx, &backfillCmd{kind: cmdResume, id: id})
	return err
}

// Cancel ends backfill id; the rows it delivered stay in Kafka.
func (b *Backfills) Cancel(ctx context.Context, id string) error {
	_, err := b.do(ctx, &backfillCmd{kind: cmdCancel, id: id})
	return err
}

// do queues c for Run and waits for its verdict. A call whose ctx ends
// is taken back if Run has not taken it yet.
func (b *Backfills) do(ctx context.Context, c *backfillCmd) (backfillReply, error) {
	c.reply = make(chan backfillReply, 1)
	b.mu.Lock()
	b.cmds = append(b.cmds, c)
	if b.wake != nil {
		poke(b.wake)
	}
	b.mu.Unlock()
	select {
	case r := <-c.reply:
		return r, r.err
	case <-ctx.Done():
		b.mu.Lock()
		b.cmds = slices.DeleteFunc(b.cmds, func(x *backfillCmd) bool { return x == c })
		b.mu.Unlock()
		select {
		case r := <-c.reply: // Run took it meanwhile
			return r, r.err
		default:
		}
		return backfillReply{}, fmt.Errorf("pgcdc: waiting for Run to take the backfill call: %w", context.Cause(ctx))
	}
}

// The methods below are Run's; each does nothing on a nil Backfills.

// attach makes wake the channel a new call pokes; nil detaches.
func (b *Backfills) attach(wake chan struct{}) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wake = wake
	if wake != nil && len(b.cmds) > 0 {
		poke(wake)
	}
}

// take returns the calls waiting for Run, which must answer each.
func (b *Backfills) take() []*backfillCmd {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	cmds := b.cmds
	b.cmds = nil
	return cmds
}

// publish makes list what List returns.
func (b *Backfills) publish(list []backfillCursor) {
	if b == nil {
		return
	}
	status := make([]BackfillStatus, len(list))
	for i, c := range list {
		status[i] = c.status()
	}
	b.mu.Lock()
	b.status = status
	b.mu.Unlock()
}

// poke wakes whoever waits on c, a channel of capacity 1, without
// blocking.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
