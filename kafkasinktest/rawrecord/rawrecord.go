// Package rawrecord builds, without the sink, the records a hand-written
// pipeline makes of an event: the sink's standard headers and the
// JSONEncoder's document through encoding/json. It is written apart from
// the sink's own code on purpose, so that comparing with it checks that
// code: the root module's header tests expect its headers, and the
// benchmarks of both the root module and the bench module measure the
// sink against it. It is a supported package (not internal) because two
// modules use it, and a module does not import another's internal
// packages.
package rawrecord

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

// Headers are the standard headers of set for e, in the sink's order.
func Headers(e *kafkasink.Event, set kafkasink.HeaderSet) []kgo.RecordHeader {
	all := []kgo.RecordHeader{
		{Key: kafkasink.HeaderID, Value: []byte(e.ID())},
		{Key: kafkasink.HeaderOp, Value: []byte(e.Op.String())},
		{Key: kafkasink.HeaderTable, Value: []byte(e.Schema + "." + e.Table)},
		{Key: kafkasink.HeaderLSN, Value: []byte(strconv.FormatUint(uint64(e.LSN), 10))},
		{Key: kafkasink.HeaderCommitLSN, Value: []byte(strconv.FormatUint(uint64(e.Position.LSN), 10))},
	}
	switch set {
	case kafkasink.HeadersMinimal:
		return all[:2]
	case kafkasink.HeadersNone:
		return nil
	}
	return all
}

// StdlibJSON is what a hand-written pipeline makes of e: the
// JSONEncoder's document through encoding/json, with a map for the row,
// as columns are dynamic.
func StdlibJSON(e *kafkasink.Event) ([]byte, error) {
	after := make(map[string]any, len(e.After))
	for _, c := range e.After {
		after[c.Name] = c.Value
	}
	return json.Marshal(struct {
		ID         string         `json:"id"`
		Op         string         `json:"op"`
		Schema     string         `json:"schema"`
		Table      string         `json:"table"`
		LSN        string         `json:"lsn"`
		CommitLSN  string         `json:"commit_lsn"`
		Index      uint64         `json:"index"`
		XID        uint32         `json:"xid"`
		CommitTime time.Time      `json:"commit_time"`
		Key        []string       `json:"key"`
		Before     map[string]any `json:"before"`
		After      map[string]any `json:"after"`
	}{e.ID(), e.Op.String(), e.Schema, e.Table, strconv.FormatUint(uint64(e.LSN), 10), strconv.FormatUint(uint64(e.Position.LSN), 10),
		e.Position.Index, e.XID, e.Commit, e.Key, nil, after})
}
