package pgcdc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// This file reads the backfill signals a database session sends through
// the stream itself, with
//
//	SELECT pg_logical_emit_message(true, '<Config.SignalPrefix>', '<json>')
//
// which needs no table and no write by Run. The JSON is Debezium's signal:
// the type and data of a row of its signal table, or of a record of its
// Kafka signal channel.

// signal is a signal's JSON: Debezium's id, type and data.
type signal struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// snapshotSignalData is the data of Debezium's execute-snapshot and
// stop-snapshot signals, every field Debezium 3.6 reads.
type snapshotSignalData struct {
	DataCollections      []string              `json:"data-collections"`
	Type                 string                `json:"type"`
	AdditionalConditions []additionalCondition `json:"additional-conditions"`
	SurrogateKey         string                `json:"surrogate-key"`
	// AdditionalCondition is the single condition of Debezium before
	// 2.1, which it no longer reads; named to refuse it by name.
	AdditionalCondition *string `json:"additional-condition"`
}

type additionalCondition struct {
	DataCollection string `json:"data-collection"`
	Filter         string `json:"filter"`
}

// signalAction is what one signal asks of Run.
type signalAction struct {
	kind backfillCmdKind
	// reqs are the backfills an execute-snapshot asks for, one per
	// table; tables the backfills a stop-snapshot stops, nil for all.
	reqs   []BackfillRequest
	tables []string
}

// parseSignal reads a signal's JSON. Anything it does not support is
// named in the error, which is a *BackfillError.
func parseSignal(content []byte) (signalAction, error) {
	refuse := func(format string, args ...any) (signalAction, error) {
		return signalAction{}, &BackfillError{Problem: fmt.Sprintf("signal %s: ", content) + fmt.Sprintf(format, args...)}
	}
	var s signal
	if err := strictJSON(content, &s); err != nil {
		return refuse("not a signal: %v; want Debezium's signal JSON, such as "+
			`{"type":"execute-snapshot","data":{"data-collections":["public.orders"],"type":"incremental"}}`, err)
	}
	data := s.Data
	// The signal table holds data as text: accept it as a JSON string
	// too.
	var text string
	if len(data) > 0 && data[0] == '"' && json.Unmarshal(data, &text) == nil {
		data = json.RawMessage(text)
	}
	switch t := strings.ToLower(s.Type); t {
	case "execute-snapshot", "stop-snapshot":
		var d snapshotSignalData
		if len(data) == 0 || bytes.Equal(data, []byte("null")) {
			if t == "execute-snapshot" {
				return refuse(`execute-snapshot needs data with "data-collections"`)
			}
		} else if err := strictJSON(data, &d); err != nil {
			return refuse("its data does not parse: %v", err)
		}
		switch {
		case d.Type != "" && !strings.EqualFold(d.Type, "incremental"):
			// A blocking snapshot stops the stream while it reads: WAL
			// piles up and every table's changes wait. A backfill gives
			// the same rows while the stream runs, exactly once and never
			// after a newer change of their key.
			return refuse("snapshot type %q is not supported: only incremental snapshots are; a blocking one would stop the stream while it reads, "+
				`and an incremental one delivers the same rows while it runs: use "type": "incremental"`, d.Type)
		case d.SurrogateKey != "":
			return refuse(`"surrogate-key" is not supported: backfills read tables in the order of their primary key or replica identity index`)
		case d.AdditionalCondition != nil:
			return refuse(`"additional-condition" is Debezium's form before 2.1, which it no longer reads: use "additional-conditions": [{"data-collection": ..., "filter": ...}]`)
		}
		if t == "stop-snapshot" {
			return signalAction{kind: cmdCancel, tables: d.DataCollections}, nil
		}
		if len(d.DataCollections) == 0 {
			return refuse(`execute-snapshot needs "data-collections", the tables to read`)
		}
		a := signalAction{kind: cmdRequest}
		for _, table := range d.DataCollections {
			a.reqs = append(a.reqs, BackfillRequest{Table: table})
		}
	conditions:
		for _, c := range d.AdditionalConditions {
			for i := range a.reqs {
				if a.reqs[i].Table == c.DataCollection {
					if a.reqs[i].Where != "" {
						return refuse("two additional conditions for %q: give one", c.DataCollection)
					}
					a.reqs[i].Where = c.Filter
					continue conditions
				}
			}
			return refuse("an additional condition names %q, which is not among the data collections %q", c.DataCollection, d.DataCollections)
		}
		return a, nil
	case "pause-snapshot", "resume-snapshot":
		kind := cmdPause
		if t == "resume-snapshot" {
			kind = cmdResume
		}
		return signalAction{kind: kind}, nil
	case "":
		return refuse(`no "type": want execute-snapshot, stop-snapshot, pause-snapshot or resume-snapshot`)
	default:
		return refuse("type %q is not supported: want execute-snapshot, stop-snapshot, pause-snapshot or resume-snapshot", s.Type)
	}
}

// strictJSON decodes one JSON value into v, refusing fields v does not
// have and anything after the value.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more after the JSON value")
	}
	return nil
}

// backfillMessage takes a logical decoding message with the signal prefix
// (Config.SignalPrefix): a transactional one at its transaction's commit,
// in order with the stream, a non-transactional one at once.
func (s *session) backfillMessage(m Message) {
	if m.Transactional {
		s.bf.pending = append(s.bf.pending, pendingSignal{xid: m.XID, lsn: m.LSN, content: m.Content})
		return
	}
	s.takeSignal(signalPos{Commit: lsnText(m.LSN), Message: lsnText(m.LSN)}, m.Content)
}

// backfillCommit notes a committed transaction: the window learns its
// id, and its signals take effect at its commit LSN.
func (s *session) backfillCommit(t Txn) {
	b := s.bf
	b.win.txn(t.XID)
	pending := b.pending
	b.pending = nil
	for _, p := range pending {
		if p.xid == t.XID {
			s.takeSignal(signalPos{Commit: lsnText(t.CommitLSN), Message: lsnText(p.lsn)}, p.content)
		} else {
			b.pending = append(b.pending, p) // a streamed transaction still in progress
		}
	}
}

// takeSignal carries out the signal at pos, unless the checkpoint shows
// it taken already (the server sends a transaction again after a
// restart until the slot is confirmed past it). A signal Run refuses is
// logged and noted in the Monitor; the stream goes on.
func (s *session) takeSignal(pos signalPos, content []byte) {
	b := s.bf
	if !pos.after(b.lastSignal) {
		return
	}
	b.lastSignal = pos
	b.changed = true
	defer s.carryBackfills()
	a, err := parseSignal(content)
	if err != nil {
		b.refused(err, "signal")
		return
	}
	switch a.kind {
	case cmdRequest:
		reqs, err := b.expandCollections(s.ctx, a.reqs)
		if err != nil {
			b.refused(err, "signal")
			return
		}
		for _, req := range reqs {
			if _, err := b.accept(s.ctx, req, "signal"); err != nil {
				b.refused(err, "signal")
			}
		}
	case cmdCancel:
		if a.tables == nil {
			for len(b.live) > 0 {
				b.change(cmdCancel, 0)
			}
			return
		}
		for _, t := range a.tables {
			// As Debezium reads it: a regular expression matched
			// against the whole "schema.table", else a table name.
			if re, err := regexp.Compile(`^(?:` + t + `)$`); err == nil && slices.ContainsFunc(b.live, func(c backfillCursor) bool { return re.MatchString(c.Table) }) {
				for i := len(b.live) - 1; i >= 0; i-- {
					if re.MatchString(b.live[i].Table) {
						b.change(cmdCancel, i)
					}
				}
				continue
			}
			i := -1
			if schema, table, err := splitTable(t); err == nil {
				i = slices.IndexFunc(b.live, func(c backfillCursor) bool { return c.Table == schema+"."+table })
			}
			if i < 0 {
				b.refused(&BackfillError{Table: t, Problem: "stop-snapshot names a table no backfill reads"}, "signal")
				continue
			}
			b.change(cmdCancel, i)
		}
	default: // pause or resume every backfill, as Debezium does
		for i := range b.live {
			b.change(a.kind, i)
		}
	}
}

// expandCollections reads the data collections of an execute-snapshot as
// Debezium does: each is a regular expression matched against the whole
// "schema.table" of every published table, standing for the tables it
// matches, or for itself when it matches none (then it is a table name,
// which accept checks); each table once, with the condition given for the
// collection that named it first.
func (b *backfiller) expandCollections(ctx context.Context, reqs []BackfillRequest) ([]BackfillRequest, error) {
	var published []publishedTable
	err := b.readOnly(ctx, func(tx pgx.Tx) error {
		var err error
		published, err = b.r.capturedTables(ctx, tx)
		return err
	})
	if err != nil {
		return nil, &BackfillError{Problem: "reading the publication's tables to match the signal's data collections against", Err: err}
	}
	var out []BackfillRequest
	seen := make(map[[2]string]bool)
	add := func(r BackfillRequest) {
		schema, table, err := splitTable(r.Table)
		if err != nil { // accept refuses it by name
			out = append(out, r)
			return
		}
		if k := [2]string{schema, table}; !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	for _, r := range reqs {
		// Java's Matcher.matches, which Debezium uses, matches the
		// whole name. A pattern Go's regexp cannot compile stands for
		// itself.
		re, err := regexp.Compile(`^(?:` + r.Table + `)$`)
		matched := false
		for _, p := range published {
			if err == nil && re.MatchString(p.name()) {
				add(BackfillRequest{Table: qualified(p.schema, p.table), Where: r.Where})
				matched = true
			}
		}
		if !matched {
			add(r)
		}
	}
	return out, nil
}
