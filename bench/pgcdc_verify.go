package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

// rowWant is what the topic must hold of one row of the table.
type rowWant struct {
	changes int64 // its records
	version int64 // the version column of the last, as the database holds it
}

// rowSeen is what the topic holds of one row.
type rowSeen struct {
	changes int64
	lastLSN uint64 // the kafkasink.lsn header of the last record
	last    []byte // the value of the last record
}

// verifyTopic reads topic back as a read_committed consumer and checks
// that it holds each change of the table's rows once: per row (the record
// key is its id, the text key of the primary key) the records the
// workload made, their change LSNs strictly increasing (a change written
// twice repeats its LSN), and the last one carrying the version the
// database holds. It returns the key, value and header bytes read.
func verifyTopic(ctx context.Context, admin *kadm.Client, brokers []string, topic string, want map[int64]rowWant) (int64, error) {
	seen := map[int64]*rowSeen{}
	var n int64
	err := eachCommitted(ctx, admin, brokers, topic, func(r *kgo.Record) error {
		id, err := strconv.ParseInt(string(r.Key), 10, 64)
		if err != nil {
			return fmt.Errorf("partition %d offset %d: key %q is not a row id", r.Partition, r.Offset, r.Key)
		}
		lsn, err := changeLSN(r)
		if err != nil {
			return fmt.Errorf("partition %d offset %d: %w", r.Partition, r.Offset, err)
		}
		s := seen[id]
		if s == nil {
			s = &rowSeen{}
			seen[id] = s
		}
		if lsn <= s.lastLSN {
			return fmt.Errorf("row %d: the change at LSN %s is at partition %d offset %d after the change at LSN %s: written twice or out of order",
				id, kafkasink.LSN(lsn), r.Partition, r.Offset, kafkasink.LSN(s.lastLSN))
		}
		s.changes++
		s.lastLSN = lsn
		s.last = append(s.last[:0], r.Value...)
		n += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			n += int64(len(h.Key) + len(h.Value))
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading topic %s back: %w", topic, err)
	}
	var problems []string
	for id, w := range want {
		s := seen[id]
		switch {
		case s == nil:
			problems = append(problems, fmt.Sprintf("row %d: no record, want %d", id, w.changes))
		case s.changes != w.changes:
			problems = append(problems, fmt.Sprintf("row %d: %d records, want %d", id, s.changes, w.changes))
		default:
			if v, err := lastVersion(s.last); err != nil || v != w.version {
				problems = append(problems, fmt.Sprintf("row %d: the last record has version %d (%v), the database %d", id, v, err, w.version))
			}
		}
	}
	for id := range seen {
		if _, ok := want[id]; !ok {
			problems = append(problems, fmt.Sprintf("row %d: records, but no such row in the table", id))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return 0, fmt.Errorf("topic %s, read back read_committed, does not hold each change once: %d rows differ from the database: %s",
			topic, len(problems), strings.Join(problems[:min(5, len(problems))], "; "))
	}
	return n, nil
}

// changeLSN is the LSN of r's change: its kafkasink.lsn header, or the
// value's lsn when the header set (-headers minimal or none) leaves the
// header out.
func changeLSN(r *kgo.Record) (uint64, error) {
	if i := slices.IndexFunc(r.Headers, func(h kgo.RecordHeader) bool { return h.Key == kafkasink.HeaderLSN }); i >= 0 {
		lsn, err := strconv.ParseUint(string(r.Headers[i].Value), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s header %q is not a decimal LSN", kafkasink.HeaderLSN, r.Headers[i].Value)
		}
		return lsn, nil
	}
	var doc struct {
		LSN string `json:"lsn"`
	}
	if err := json.Unmarshal(r.Value, &doc); err != nil || doc.LSN == "" {
		return 0, fmt.Errorf("no %s header, and no lsn in the value %q", kafkasink.HeaderLSN, r.Value)
	}
	lsn, err := strconv.ParseUint(doc.LSN, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the value's lsn %q is not a decimal LSN", doc.LSN)
	}
	return lsn, nil
}

// lastVersion is the version column of the row after the change whose
// JSONEncoder value is v (an integer column is a JSON number or string).
func lastVersion(v []byte) (int64, error) {
	var doc struct {
		After struct {
			Version json.RawMessage `json:"version"`
		} `json:"after"`
	}
	if err := json.Unmarshal(v, &doc); err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(bytes.Trim(doc.After.Version, `"`)), 10, 64)
}
